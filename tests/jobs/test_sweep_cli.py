"""`python -m jobs.sweep` on a config whose method parameters are wrong: one line, exit 2."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("table", "line"), [
    ("[methods.bm25]\nbogus_param = 3",
     "error: config key 'methods.bm25': unknown key 'bogus_param'; allowed: (none)"),
    ("[methods.t2mem]\nk_initial = 0",
     "error: config key 'methods.t2mem': T2MemConfig.k_initial must be positive, got 0"),
    ("[methods.tmem.discovery_config]\nmax_gapp = 3",
     "error: config key 'methods.tmem.discovery_config': unknown key 'max_gapp'; allowed: "),
])
def test_bad_method_parameter_is_one_error_line_before_ray(tmp_path: Path, table: str,
                                                          line: str) -> None:
    method = table.split("]")[0].split(".")[1]
    config = tmp_path / "bad.toml"
    config.write_text(textwrap.dedent(f"""\
        results_dir = "{tmp_path / 'results'}"
        [[benchmarks]]
        name = "synthetic"
        size = 200
        [grid]
        methods = ["{method}"]
        backbones = ["smollm2"]
        """) + table + "\n")
    done = subprocess.run([sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [done.stderr.splitlines()[0]]  # one line
    assert done.stderr.startswith(line)
    assert not (tmp_path / "results").exists()  # nothing written, Ray never started
