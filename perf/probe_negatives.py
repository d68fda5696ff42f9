"""How many calibration negatives a second, independent look would count as right.

    PYTHONPATH=. python perf/probe_negatives.py [--before main] [--source LOCOMO_JSON]

Builds the calibration controls of the prepared LoCoMo questions (`ControlPool`, as the
judge stage does) twice: with the code of `--before` (a git ref, extracted to a temporary
folder) and with this checkout's. For each, of the `other` negatives (and of the
`shifted_date` ones): how many come from the question's own conversation, and how many the
second look (`tests/evaluation/second_look.py`:
dateutil intervals, yes/no sides read from the question, MiniLM cosine >= 0.75, none of it
the builder's rule) accepts as the gold, by reason.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections import Counter
from io import BytesIO
from pathlib import Path

from tests.conftest import LOCOMO
from tests.evaluation.second_look import Pair, SecondLook
from tmem_core.retrieval import MiniLMEmbedder

ROOT = Path(__file__).resolve().parents[1]
DUMP = """
import json, sys
from pathlib import Path
import tmem_core
from tmem_core.benchmarks import LoadRequest, build, get_protocol
from tmem_core.evaluation import ControlPool, Rules
from tmem_core.schema import gold_from_table, questions_from_table
assert Path(tmem_core.__file__).resolve().is_relative_to(Path.cwd().resolve()), tmem_core.__file__
prepared = build("locomo", LoadRequest(source=Path(sys.argv[1])))
questions = questions_from_table(prepared.questions)
gold = gold_from_table(prepared.questions)
conv = {q.qid: q.conv_id for q in questions}
pool = ControlPool([(q, gold[q.qid]) for q in questions], Rules.of(get_protocol("locomo")))
for q in questions:
    for c in pool.controls(q, gold[q.qid]):
        if c.kind in ("other", "shifted_date"):
            print(json.dumps({"kind": c.kind, "qid": q.qid, "question": q.question,
                              "gold": gold[q.qid].answer, "negative": c.prediction,
                              "same_conv": conv.get(c.other_qid) == q.conv_id}))
"""


def others(tree: Path, source: Path) -> list[dict[str, object]]:
    """The `other` controls the code in `tree` builds for the LoCoMo file `source`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", DUMP, str(source)], cwd=tree, env=env,
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def extracted(ref: str, into: Path) -> Path:
    """This repository's files at `ref`, written under `into`."""
    archive = subprocess.run(["git", "archive", ref], cwd=ROOT, check=True,
                             capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def report(label: str, rows: list[dict[str, object]], look: SecondLook) -> None:
    """Per kind, how many negatives the second look accepts as the gold, and which."""
    for kind in ("other", "shifted_date"):
        of_kind = [r for r in rows if r["kind"] == kind]
        reasons = look.accepted([Pair(str(r["question"]), str(r["gold"]), str(r["negative"]))
                                 for r in of_kind])
        accepted = Counter(r for r in reasons if r is not None)
        n = sum(accepted.values())
        same = (f", {sum(bool(r['same_conv']) for r in of_kind)} from the question's own "
                f"conversation, {len({r['negative'] for r in of_kind})} distinct"
                if kind == "other" else "")
        print(f"{label}: {len(of_kind)} `{kind}` negatives{same}; the second look accepts "
              f"{n} ({n / max(len(of_kind), 1):.1%}): {dict(sorted(accepted.items()))}")
        for row, reason in zip(of_kind, reasons, strict=True):
            if reason is not None:
                print(f"  {reason:10s} {row['qid']}: {row['gold']!r} | {row['negative']!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git ref of the code to compare with")
    ap.add_argument("--source", type=Path, default=LOCOMO)
    args = ap.parse_args()
    look = SecondLook(MiniLMEmbedder().encode)
    with tempfile.TemporaryDirectory() as tmp:
        before = others(extracted(args.before, Path(tmp)), args.source)
    report(f"before ({args.before})", before, look)
    report("after (this checkout)", others(ROOT, args.source), look)


if __name__ == "__main__":
    main()
