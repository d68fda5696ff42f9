"""`python -m jobs.llm` on bad input: one `error:` line and exit status 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(("argv", "line"), [
    (["--backbone", "gpt-5.5"], "error: config key 'backbones.gpt-5.5.engine.api_key_env': "
                                "environment variable OPENAI_API_KEY is not set"),
    (["--backbone", "nope"], "error: unknown backbone 'nope'; allowed: "),
    (["--schema", "missing.json"], "error: config key '--schema': cannot read missing.json: "
                                     "[Errno 2] No such file or directory"),
])
def test_bad_input_is_one_error_line(argv: list[str], line: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    done = subprocess.run([sys.executable, "-m", "jobs.llm", "--prompt", "hi", *argv],
                          cwd=ROOT, env={**env, "TMEM_CACHE_DIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(line), done.stderr
    assert done.stdout == ""
