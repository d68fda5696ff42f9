"""Every shell block of README.md and cluster/README.md, as written: each carries a marker
comment on the line before it saying whether it runs here (`run`, or `serves <url>` for a
server, which must answer), needs a cluster (`cluster-only (...)`: checked statically, by
tests/cluster), or is not run by the tests (`not run by the tests: <why>`). A block without a
marker, or a runnable block that fails, fails the test, so the docs cannot drift from what the
commands do. The blocks run in the checkout, in order, each in one bash, on free ports and a
Ray folder and token of their own; a block that runs a sweep runs it with no results left
from before (a submitted sweep whose results are lost fails its `jobs.report`)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.ray_head import free_ports

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "cluster/README.md")
MARKER = re.compile(r"<!-- commands: (run|serves (\S+)|cluster-only \(.+?\)|not run by the "
                    r"tests: .+?) -->\n```(?:bash|sh|shell)\n(.*?)```", re.DOTALL)
FENCE = re.compile(r"^```(?:bash|sh|shell)$", re.MULTILINE)
ARTIFACT = ROOT / "results" / "test-artifacts" / "documented-commands.txt"


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    kind: str  # "run", "serves", "cluster-only", "not run"
    url: str
    script: str

    def describe(self) -> str:
        first = self.script.strip().splitlines()[0]
        return f"{self.doc}:{self.line} [{self.kind}] {first}"


def blocks(doc: str) -> list[Block]:
    text = (ROOT / doc).read_text()
    found = [Block(doc, text[:m.start(3)].count("\n"),
                   m[1].split(" ")[0].replace("not", "not run"), m[2] or "", m[3])
             for m in MARKER.finditer(text)]
    fences = len(FENCE.findall(text))
    assert fences == len(found), f"{doc}: {fences - len(found)} shell block(s) without a marker"
    return found


def _environment(tmp: Path) -> dict[str, str]:
    """The shell a user has after `make setup`, with this test's own Ray ports, folder and
    token (cluster/env.sh and start-local.sh read them), and no Ray or make of the caller's."""
    ports = free_ports()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MAKE", "RAY_")) and k != "MFLAGS"}
    return {**env, **ports, "PATH": f"{Path(sys.executable).parent}:{env['PATH']}",
            "RAY_TEMP_DIR": f"/tmp/ray-{ports['RAY_GCS_PORT']}",
            "RAY_AUTH_TOKEN_PATH": str(tmp / "token")}


def _results_of(script: str) -> list[Path]:
    """The results folders a block's sweep writes (cleared first: what it reports is its own)."""
    if "jobs.sweep" not in script:
        return []
    reported = re.findall(r"jobs\.report (\S+)", script)
    return sorted({ROOT / folder for folder in reported})  # an absolute one stays as it is


def _run(block: Block, env: dict[str, str]) -> None:
    for folder in _results_of(block.script):
        shutil.rmtree(folder, ignore_errors=True)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.script], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, (block.describe(), done.stdout[-3000:], done.stderr[-3000:])
    for folder in _results_of(block.script):  # the report of the sweep the block ran
        assert (folder / "report" / "report.md").is_file(), (block.describe(), folder)
        assert f"wrote {folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder}" \
            in done.stdout, (block.describe(), done.stdout[-2000:])


def _serve(block: Block, env: dict[str, str]) -> None:
    server = subprocess.Popen(["bash", "-euo", "pipefail", "-c", block.script], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, (block.describe(), server.stdout and
                                           server.stdout.read().decode()[-3000:])
            with contextlib.suppress(OSError), urllib.request.urlopen(block.url,
                                                                      timeout=10) as page:
                assert page.status == 200 and b"quickstart" in page.read()
                return
            assert time.monotonic() < deadline, f"{block.describe()}: {block.url} never answered"
            time.sleep(1)
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_every_documented_shell_block_is_marked_and_the_runnable_ones_run(tmp_path: Path
                                                                           ) -> None:
    documented = [b for doc in DOCS for b in blocks(doc)]
    assert {b.kind for b in documented} >= {"run", "serves", "cluster-only"}
    env = _environment(tmp_path)
    ran = []
    try:
        for block in documented:
            if block.kind == "run":
                _run(block, env)
            elif block.kind == "serves":
                _serve(block, env)
            else:
                continue
            ran.append(block)
    finally:
        subprocess.run([str(ROOT / "cluster" / "stop-local.sh")], cwd=ROOT, env=env,
                       capture_output=True, timeout=120, check=False)
        for folder in {f for b in documented for f in _results_of(b.script)} - {
                ROOT / "results" / "quickstart"}:
            shutil.rmtree(folder, ignore_errors=True)
    listing = [f"ran: {b.describe()}" for b in ran] + [
        f"not run here: {b.describe()}" for b in documented if b not in ran]
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    ARTIFACT.write_text("\n".join(listing) + "\n")
    print("\n".join(listing))
    assert len(ran) == sum(b.kind in ("run", "serves") for b in documented)
