"""`python -m jobs.inspect`: one question's discovery, labels, forest and context."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest
from test_tmem_fakes import ScriptedLLM, by_stage, label_all, link_all

import jobs.inspect as inspect_job
from tests.hashed_embedder import HashEmbedder
from tmem_core.retrieval import Conversation, IndexStore
from tmem_core.schema import DataError

SCRIPT = by_stage(select=label_all("KEY"), structure=link_all("none", "ROOT"))


def _run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *args: str) -> None:
    @contextlib.contextmanager
    def scripted(_: str) -> Iterator[ScriptedLLM]:
        yield ScriptedLLM(SCRIPT)

    def hashed(conversations: Mapping[str, Conversation]) -> IndexStore:
        return IndexStore(conversations, HashEmbedder(), tmp_path)

    monkeypatch.setattr(inspect_job, "open_client", scripted)
    monkeypatch.setattr(inspect_job, "IndexStore", hashed)
    monkeypatch.setattr(sys, "argv", ["inspect", "--benchmark", "synthetic", "--size", "400",
                                      "--variant", "revisions", *args])
    assert inspect_job.main() == 0


def test_inspect_shows_every_step_of_tmem(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, tmp_path, "--qid", "syn-0-0:q00000", "--budget", "600")
    out = capsys.readouterr().out
    for part in ("== syn-0-0:q00000 [knowledge_update]", "== discovery", "anchors (",
                 "-- intervals (", "-- candidates (", "KEY      m", "== selection (llm)",
                 "== forest (", "ROOT m", "== context (forest, ", "== LLM select: ",
                 "== gold (for the reader"):
        assert part in out, part
    assert "clusters split at gaps over 2h; density = seeds per hour of the span (floor 1h); " \
           "kept at >= 1.00/h" in out
    clusters = re.findall(r"^  (kept|drop) topic:[^:]+: (\d+) seeds? (?:at|\S+ \S+ to) .*"
                          r"density (\d+\.\d\d)/h (>=|<) 1\.00, padded to \d+ messages?$", out,
                          re.MULTILINE)
    assert clusters and all((verdict == "kept") == (sign == ">=") == (float(d) >= 1.0)
                            for verdict, _, d, sign in clusters)
    tokens = int(out.split("== context (forest, ")[1].split(" tokens")[0])
    assert 0 < tokens <= 600


def test_inspect_ablation_and_unknown_question(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    _run(monkeypatch, tmp_path, "--qid", "syn-0-0:q00001", "--method", "tmem_wo_structuring")
    out = capsys.readouterr().out
    assert "== context (flat, " in out and "tmem_wo_structuring" in out
    with pytest.raises(DataError, match="no question 'nope'"):
        _run(monkeypatch, tmp_path, "--qid", "nope")
    _run(monkeypatch, tmp_path, "--qid", "syn-0-0:q00001", "--method", "bm25", "--top-k", "5")
    assert "-- context (flat, " in capsys.readouterr().out  # any registered method
