"""`python -m jobs.recall` end to end on a small synthetic benchmark (real MiniLM + faiss)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_recall_job_on_small_synthetic(tmp_path: Path) -> None:
    out = tmp_path / "recall.json"
    env = {**os.environ, "TMEM_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "jobs.recall", "--benchmark", "synthetic", "--size", "300",
         "--methods", "bm25,dense,hybrid,bm25_expand,naive_rag,tmem_reranked,tmem_global",
         "--k", "5,20", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    methods = ["bm25", "dense", "hybrid", "bm25_expand", "naive_rag", "tmem_reranked",
               "tmem_global"]
    for method in methods:
        assert set(result[method]) == {"5", "20"}
        assert 0.0 <= result[method]["5"] <= result[method]["20"] <= 1.0
        assert result["by_category"][method]["20"]
    assert result["tmem_reranked"]["20"] > result["bm25"]["20"]
    assert "tmem_reranked" in done.stdout and "@20" in done.stdout
    assert list((tmp_path / "cache" / "index").iterdir())  # indexes went to the cache
