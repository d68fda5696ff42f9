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
from tmem_core import DataError
from tmem_core.methods.tmem import DiscoveryConfig
from tmem_core.retrieval import Conversation, IndexStore

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
                                      "--variant", "native-revisions", *args])
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
    config = DiscoveryConfig()
    assert (f"clusters split at gaps over {config.max_gap:g} u; rate = seeds per unit of the "
            f"interval (at least {config.min_duration:g} u; u = the conversation's median "
            f"interval between messages); kept when above a threshold "
            f"{config.threshold_position:g} of the way from the group's background rate to the "
            f"episode rate") in out
    clusters = re.findall(r"^  (kept|drop) topic:[^:]+: (\d+) seeds? (?:at|\S+ \S+ to) .*"
                          r"rate (\d+\.\d+)/u (>|<=) threshold (\d+\.\d+)/u \(background "
                          r"(\d+\.\d+)/u, episode (\d+\.\d+)/u\), padded to \d+ messages?$",
                          out, re.MULTILINE)
    assert clusters and any(v == "kept" for v, *_ in clusters)
    for verdict, seeds, rate, sign, threshold, background, episode in clusters:
        assert (verdict == "kept") == (sign == ">") == (float(rate) > float(threshold))
        assert float(background) <= float(threshold) <= float(episode)
        assert verdict == "drop" or int(seeds) > 1  # a lone seed in a quiet topic is dropped
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
