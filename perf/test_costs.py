"""Each test file's measured cost, from a pytest JUnit XML report, as tests/costs.json: the
suite runs its files heaviest first, so the workers of `pytest -n N --dist loadfile` finish
together (longest first: no long file is left to start last).

    python -m pytest -n 2 --dist loadfile --junitxml=/tmp/junit.xml
    python perf/test_costs.py /tmp/junit.xml          # rewrites tests/costs.json
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

COSTS = Path(__file__).resolve().parents[1] / "tests" / "costs.json"


def file_costs(report: Path) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests) in `report`."""
    costs: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        module = case.get("classname", "").split("::")[0]
        parts = module.split(".")
        while parts and parts[-1][:1].isupper():  # a test class: its module is the file
            parts.pop()
        costs["/".join(parts) + ".py"] += float(case.get("time", 0))
    return dict(costs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("report", type=Path, help="pytest's --junitxml file")
    costs = file_costs(parser.parse_args().report)
    COSTS.write_text(json.dumps({f: round(s, 1) for f, s in sorted(costs.items())}, indent=1)
                     + "\n")
    total = sum(costs.values())
    print(f"{len(costs)} files, {total:.0f} s in all; heaviest: "
          + ", ".join(f"{f} {s:.0f} s" for f, s in sorted(costs.items(), key=lambda x: -x[1])[:5]))


if __name__ == "__main__":
    main()
