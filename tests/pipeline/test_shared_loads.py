"""Routers share their calls in flight through one board actor on a real (local) Ray: a busy
router's last counts reach the others though it makes no further call, and so do an idle
router's zeros (the times are printed; on a loaded machine a Ray call can take seconds)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.ray_head import ROOT

pytestmark = pytest.mark.slow

SCRIPT = textwrap.dedent("""\
    import json, time
    from tmem_core.pipeline import init_ray
    from tmem_core.pipeline._loads import REFRESH_S, SharedLoads

    def seen_by(loads, want, limit_s=60.0):
        started = time.monotonic()
        while loads.others() != want and time.monotonic() - started < limit_s:
            time.sleep(0.01)
        return loads.others(), round(time.monotonic() - started, 3)

    init_ray(num_cpus=1)
    a, b = SharedLoads("tmem-loads-x", 3, "a"), SharedLoads("tmem-loads-x", 3, "b")
    a.publish([0, 0, 0])
    seen_by(b, [0, 0, 0])  # the board is up
    for step in range(200):  # a busy router: its counts change at every call
        a.publish([step % 5, 2, 0])
    a.publish([1, 2, 0])
    busy = seen_by(b, [1, 2, 0])
    a.publish([0, 0, 0])  # idle
    idle = seen_by(b, [0, 0, 0])
    print(json.dumps({"busy": busy, "idle": idle, "refresh": REFRESH_S}))
""")


def test_routers_see_each_other_s_calls_in_flight_and_an_idle_one_at_once() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    (busy, busy_s), (idle, idle_s) = result["busy"], result["idle"]
    print(f"seen after {busy_s} s (busy) and {idle_s} s (idle); refresh {result['refresh']} s")
    assert busy == [1, 2, 0]  # the last counts of a router that stopped calling
    assert idle == [0, 0, 0]
