"""A request that crashes its engine is quarantined: on a real (local) Ray with three
simulated replicas, a poisoned prompt costs one replica restart and becomes an `engine_crash`
error of its question; it is never resent, so the other replicas keep their engines and answer
every other question."""

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
    import ray
    from tmem_core.llm import ChatRequest
    from tmem_core.llm._config import parse_backbones
    from tmem_core.llm._types import ChatMessage
    from tmem_core.pipeline import init_ray
    from tmem_core.pipeline._engine import ReplicaRouter
    from tmem_core.pipeline._replicas import engine_handles

    init_ray(num_cpus=2)
    backbone = parse_backbones({"crashy": {
        "backend": "sim", "model": "sim", "replicas": 3,
        "engine": {"crash_on": "POISON", "step_s": 0.001, "max_output_tokens": 8}}})["crashy"]
    handles = engine_handles(backbone)
    def pid(handle, deadline):
        while True:  # a restarting replica answers once its new process is up
            try:
                return ray.get(handle.ping.remote(), timeout=120)
            except ray.exceptions.ActorUnavailableError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
    def pids():
        deadline = time.monotonic() + 300
        return [pid(h, deadline) for h in handles]
    def ask(qid, text):
        return [ChatRequest([ChatMessage("user", text)], stage="answer", qid=qid)]
    before = pids()
    router = ReplicaRouter(backbone)
    poisoned, _ = router(ask("q-poison", "When is the launch? POISON"))
    time.sleep(5)  # the crashed replica's process ends and Ray restarts it
    after = pids()
    others = [router(ask(f"q{i}", f"question {i}"))[0][0] for i in range(24)]
    print(json.dumps({
        "poisoned": [r.error_kind for r in poisoned], "error": poisoned[0].error,
        "restarted": sum(a != b for a, b in zip(before, after)),
        "others_ok": sum(r.ok for r in others), "others": len(others)}))
""")


def test_a_poisoned_prompt_costs_one_replica_restart_and_is_never_resent() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["poisoned"] == ["engine_crash"] and "POISON" in result["error"]
    assert result["restarted"] == 1  # resent, it would have crashed the next replica too
    assert result["others_ok"] == result["others"]  # every replica answers again
    assert "[router]" not in done.stdout  # nothing was resent
