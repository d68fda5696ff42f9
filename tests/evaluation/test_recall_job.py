"""`python -m jobs.recall` end to end on a small synthetic benchmark (real MiniLM + faiss), and
with an LLM selecting T-MEM's evidence."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _recall(tmp_path: Path, *flags: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "recall.json"
    env = {**os.environ, "TMEM_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.recall", "--benchmark", "synthetic", "--size", "300",
         *flags, "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    return done, out


def test_recall_job_on_small_synthetic(tmp_path: Path) -> None:
    methods = ["bm25", "dense", "hybrid", "bm25_expand", "naive_rag", "tmem_candidates",
               "tmem_heuristic", "tmem_heuristic_global"]
    done, out = _recall(tmp_path, "--methods", ",".join(methods), "--k", "5,20")
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for method in methods:
        assert set(result[method]) == {"5", "20"}
        assert 0.0 <= result[method]["5"] <= result[method]["20"] <= 1.0
        assert result["by_category"][method]["20"]
    assert result["tmem_heuristic"]["20"] > result["bm25"]["20"]
    assert "tmem_heuristic" in done.stdout and "@20" in done.stdout
    assert list((tmp_path / "cache" / "index").iterdir())  # indexes went to the cache


def test_llm_methods_need_a_backbone(tmp_path: Path) -> None:
    done, _ = _recall(tmp_path, "--methods", "bm25,tmem_reranked", "--k", "5")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: method 'tmem_reranked' selects its evidence with an LLM: name a backbone")


def test_recall_of_llm_selection_with_a_backbone(tmp_path: Path) -> None:
    """T-MEM keeps all it selects from k anchors; T-Mem Reranked the same cut to k (so at
    most T-MEM's recall); every selection call is the backbone's."""
    done, out = _recall(tmp_path, "--methods", "tmem,tmem_reranked,tmem_global",
                        "--k", "5,12", "--limit", "4", "--backbone", "sim")
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    for k in ("5", "12"):
        assert 0.0 <= result["tmem_reranked"][k] <= result["tmem"][k] <= 1.0
        assert 0.0 <= result["tmem_global"][k] <= 1.0
