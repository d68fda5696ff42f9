"""A sweep whose cluster goes away ends with one error line and a non-zero status."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.ray_head import ROOT, free_ports, local_head, sweep_config, sweep_env, wait_for

pytestmark = pytest.mark.slow


def test_lost_cluster_ends_the_driver_with_one_error_line(tmp_path: Path) -> None:
    backbones = tmp_path / "backbones.toml"
    backbones.write_text('[backbones.slow-sim]\nbackend = "sim"\nmodel = "sim"\n'
                         'engine = { step_s = 0.3, max_output_tokens = 24, max_num_seqs = 1 }\n')
    # one sequence at a time on a cold request cache: the sweep takes minutes, so its
    # cluster goes before it ends
    config = sweep_config(tmp_path, "lost", limit=6, backbones='["slow-sim"]',
                          extra=f'backbones_file = "{backbones}"')
    cold = {"TMEM_CACHE_DIR": str(tmp_path / "cache")}
    # a head of its own, which the test stops, on ports free now: ports chosen when the
    # module was collected may be taken by the time it runs, minutes of other tests later
    ports = free_ports()
    with local_head(ports, **cold):
        log, err = tmp_path / "driver.log", tmp_path / "driver.err"
        with log.open("w") as out, err.open("w") as err_out:
            driver = subprocess.Popen(
                [sys.executable, "-m", "jobs.sweep", str(config)], cwd=ROOT,
                env=sweep_env(f"127.0.0.1:{ports['RAY_GCS_PORT']}", **ports, **cold),
                stdout=out, stderr=err_out)
        wait_for(lambda: "[progress]" in log.read_text() or driver.poll() is not None, 300,
                 "the first batch")
        assert driver.poll() is None, "the sweep ended before its cluster was stopped"
    assert driver.wait(timeout=120) != 0
    stderr = err.read_text()
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, stderr[-3000:]
    assert "went away mid-sweep" in errors[0] and "/6" in errors[0] and "resume" in errors[0]
