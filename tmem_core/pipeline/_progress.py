"""What the driver knows of its runs while they stream: the questions out of the last stage,
their failures by stage, and the job-log lines that say so."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pyarrow as pa

from tmem_core.pipeline._run import Run
from tmem_core.pipeline._watch import Landed

Log = Callable[[str], None]


class Progress:
    """Job-log lines as questions come out of the last stage (the first, then at most one
    per `every_s` seconds, and each run's last): the run's questions done / total and
    failures by stage, the sweep's questions done / total, throughput and ETA. Questions
    with failures run `check` first (it raises to end the sweep, e.g. when no engine of a
    backbone will start)."""

    def __init__(self, runs: list[Run], log: Log,
                 check: Callable[[], None] = lambda: None, every_s: float = 5.0) -> None:
        self.runs = runs
        self.total = sum(len(run.questions) for run in runs)
        self.done = 0
        self.out: dict[str, set[str]] = {run.run_id: set() for run in runs}  # qids, by run
        self.failed: dict[str, Counter[str]] = {run.run_id: Counter() for run in runs}
        self.log, self.check, self.every_s = log, check, every_s
        self.started = time.time()
        self._logged: float | None = None

    def done_of(self, run: Run) -> int:
        """The run's questions out of the last stage."""
        return len(self.out[run.run_id])

    def finished(self, run: Run) -> bool:
        return self.done_of(run) >= len(run.questions)

    def landed(self) -> tuple[Landed, ...]:
        return tuple(Landed(run.run_id, self.done_of(run), len(run.questions))
                     for run in self.runs)

    def add(self, run: Run, part: pa.Table) -> None:
        """Questions out of the last stage; one already out (a retried call's) counts once."""
        out, failed = self.out[run.run_id], self.failed[run.run_id]
        qids = part.column("qid").to_pylist()
        fresh = [i for i, qid in enumerate(qids) if qid not in out]
        out.update(qids)
        part = part.take(pa.array(fresh, pa.int64())) if len(fresh) < len(qids) else part
        errors = [e for e in part.column("error").to_pylist() if e]
        if errors:
            self.check()
        failed.update(e.split(":", 1)[0] for e in errors)
        self.done += part.num_rows
        now = time.time()
        if (self._logged is not None and now - self._logged < self.every_s and not errors
                and not self.finished(run)):
            return
        self._logged = now
        rate = self.done / max(now - self.started, 1e-9)
        eta = (self.total - self.done) / rate
        failures = ", ".join(f"{stage} {n}" for stage, n in failed.items()) or "none"
        self.log(f"[progress] {run.run_id}: {len(out)}/{len(run.questions)} "
                 f"questions through all stages (failed: {failures}); sweep "
                 f"{self.done}/{self.total}, {rate:.3g} q/s, ETA {eta:.0f}s")
