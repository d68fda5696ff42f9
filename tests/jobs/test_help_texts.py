"""What the help texts and READMEs tell a user to run exists and is accepted: `jobs.plan
--help`'s examples fit their clusters, and the Hugging Face commands are the locked
`huggingface_hub`'s."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from jobs import plan
from tmem_core.pipeline import check_sweep_gpus, load_sweep

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_the_plan_examples_fit_their_clusters() -> None:
    """Each `python -m jobs.plan CONFIG... [--replicas N]` of the help passes the GPU check
    (its data need not be on this machine)."""
    assert plan.__doc__ is not None
    examples = [shlex.split(line.split("#")[0])[3:] for line in plan.__doc__.splitlines()
                if line.strip().startswith("python -m jobs.plan")]
    assert len(examples) >= 2
    for argv in examples:
        replicas = int(argv[argv.index("--replicas") + 1]) if "--replicas" in argv else 0
        configs = [c for arg in argv if arg.endswith(".toml") for c in sorted(ROOT.glob(arg))]
        assert configs, argv
        for config in configs:
            check_sweep_gpus(load_sweep(config, sources=False), replicas)


def test_the_hugging_face_commands_are_the_locked_hubs() -> None:
    text = "\n".join(p.read_text() for p in (ROOT / "README.md", ROOT / "cluster" / "README.md"))
    commands = re.findall(r"`(hf [a-z-]+)[^`]*`", text)
    assert commands and "huggingface-cli" not in text
    for command in commands:
        sub = command.split()[1]
        done = subprocess.run([str(BIN / "hf"), sub, "--help"], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
