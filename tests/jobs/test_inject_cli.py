"""`python -m jobs.inject` with the embedded SmolLM2 writing the chains: a copy beside an
unchanged base, every call counted, a chain the model cannot write falling back to templates."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import jobs.inject as inject_job
from tmem_core import DataError
from tmem_core.benchmarks import LoadRequest, build, read_prepared, write_prepared
from tmem_core.benchmarks._revisions import REVISION_TEMPLATES, ROLLBACK_TEMPLATES, chain_of
from tmem_core.schema import gold_from_table, messages_from_table


def test_smollm2_writes_the_chains_of_a_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    base_dir, out = tmp_path / "base", tmp_path / "copy"
    write_prepared(build("synthetic", LoadRequest(size=400, seed=0)), base_dir)
    before = {p.name: p.read_bytes() for p in base_dir.iterdir()}
    monkeypatch.setattr(sys, "argv", ["inject", "--prepared", str(base_dir), "--condition", "1",
                                      "--out", str(out), "--writer", "smollm2"])
    assert inject_job.main() == 0
    assert {p.name: p.read_bytes() for p in base_dir.iterdir()} == before
    copy = read_prepared(out)
    facts = copy.manifest["revision_chains"]
    stats = facts["writer_stats"]
    assert facts["writer"] == "smollm2" and stats["calls"] == facts["questions"] > 0
    assert stats["prompt_tokens"] > 0 and stats["prompt"] == "exp5/chain@v1"
    texts = {m.msg_id: m.text for m in messages_from_table(copy.messages)}
    gold = gold_from_table(copy.questions)
    chains = {qid: c for qid, g in gold.items() if (c := chain_of(g))}
    templated = {t.split("{")[0] for t in (*REVISION_TEMPLATES, *ROLLBACK_TEMPLATES)}
    for qid, chain in chains.items():
        written = [texts[i] for i in (*chain["revisions"], chain["rollback"])]
        assert all(t.strip() for t in written)
        if qid not in stats["fallbacks"]:  # the model's own words, not a template's
            assert not all(any(t.startswith(p) for p in templated) for t in written)
    assert "revision chains (condition 1, smollm2, " in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["inject", "--prepared", str(base_dir), "--condition", "1",
                                      "--out", str(base_dir)])
    with pytest.raises(DataError, match="base is never changed"):
        inject_job.main()
