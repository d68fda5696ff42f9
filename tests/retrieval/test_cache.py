"""The on-disk cache: built once, reused, safe when two processes build at once."""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core._cache_dir import build_once
from tmem_core.retrieval import (
    CACHE_ENV,
    Bm25Index,
    Conversation,
    EmbeddingStore,
    IndexStore,
    _embed,
)
from tmem_core.retrieval._embed import QUERY_SHARD
from tmem_core.retrieval._index_keys import default_index_dir
from tmem_core.schema import Message

TEXTS = ["the checkout retry limit is five", "lunch at noon", "retry the upload later"]

ROOT = Path(__file__).resolve().parents[2]


def _conversation(conv_id: str, texts: list[str], topic: str | None = None) -> Conversation:
    t0 = datetime(2025, 1, 1, tzinfo=UTC)
    return Conversation(conv_id, tuple(
        Message(conv_id, f"{conv_id}:{i}", i, t0, text, author="Ann", topic=topic)
        for i, text in enumerate(texts)))


def test_cache_root_follows_the_environment(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert default_index_dir() == tmp_path / "index"
    monkeypatch.delenv(CACHE_ENV)
    assert default_index_dir() == Path.home() / ".cache" / "tmem-eval" / "index"


def test_second_index_build_is_a_cache_hit(tmp_path: Path) -> None:
    convs = {"c": _conversation("c", TEXTS)}
    first = IndexStore(convs, HashEmbedder(), tmp_path)
    first.index("c", metadata=True)
    assert (first.stats.built, first.stats.loaded) == (2, 0)
    embedder = HashEmbedder()
    second = IndexStore(convs, embedder, tmp_path)
    index = second.index("c", metadata=True)
    assert (second.stats.built, second.stats.loaded) == (0, 2)
    assert embedder.calls == 0  # a warm load touches no embedding
    assert index.ranking("checkout retry limit", "bm25", 1) == [0]


def test_changed_content_or_parameters_miss_the_cache(tmp_path: Path) -> None:
    IndexStore({"c": _conversation("c", TEXTS)}, HashEmbedder(), tmp_path).index("c")
    changed = IndexStore({"c": _conversation("c", [*TEXTS, "one more"])}, HashEmbedder(),
                         tmp_path)
    changed.index("c")
    assert changed.stats.built == 2


def test_embeddings_are_reused_across_conversations_and_metadata(tmp_path: Path) -> None:
    embedder = HashEmbedder()
    store = IndexStore({"a": _conversation("a", TEXTS, topic="Atlas"),
                        "b": _conversation("b", TEXTS[:2], topic="Borealis")}, embedder, tmp_path)
    store.index("a", metadata=False)
    assert embedder.calls == 3
    store.index("b", metadata=False)  # identical texts: nothing new to embed
    assert embedder.calls == 3
    store.index("a", metadata=True)  # only the metadata fields are new
    assert embedder.calls == 3 + 2  # "author: Ann", "topic: Atlas"
    fresh = EmbeddingStore(HashEmbedder(), tmp_path)
    assert fresh.embed(TEXTS).shape == (3, 256) and fresh.embedded == 0


def _slow_build(target: str, log: str, barrier: mp.synchronize.Barrier) -> None:
    def build(tmp: Path) -> None:
        with open(log, "a") as fh:
            fh.write("built\n")
        time.sleep(0.5)
        (tmp / "data.txt").write_text("complete")

    barrier.wait()
    build_once(Path(target), build)
    assert (Path(target) / "data.txt").read_text() == "complete"


def _bm25_in_child(root: str, barrier: mp.synchronize.Barrier,
                   out: mp.Queue[list[float]]) -> None:
    barrier.wait()
    index, _ = Bm25Index.cached(TEXTS, Path(root))
    out.put(index.scores("retry limit").tolist())


def _run_two(target: object, *args: object) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    procs = [ctx.Process(target=target, args=(*args, barrier)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0


def test_two_processes_build_one_artifact(tmp_path: Path) -> None:
    target, log = tmp_path / "artifact", tmp_path / "log.txt"
    _run_two(_slow_build, str(target), str(log))
    assert log.read_text().count("built") == 1
    assert (target / "data.txt").read_text() == "complete"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_two_processes_build_one_valid_bm25_index(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_bm25_in_child, args=(str(tmp_path), barrier, out))
             for _ in range(2)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(list((tmp_path / "bm25").iterdir())) == 2  # the index and its lock file
    expected, _ = Bm25Index.cached(TEXTS, tmp_path)
    assert results[0] == results[1] == expected.scores("retry limit").tolist()
    assert np.argmax(results[0]) == 0


def test_failed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    def broken(tmp: Path) -> None:
        (tmp / "partial").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        build_once(tmp_path / "artifact", broken)
    assert not (tmp_path / "artifact").exists()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


class SlowHashEmbedder(HashEmbedder):
    """Takes a while per batch, so that concurrent callers overlap inside `encode`."""

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        time.sleep(0.05)
        return super().encode(texts, progress)


def test_threads_of_one_process_share_a_store_without_embedding_twice(tmp_path: Path) -> None:
    warm = EmbeddingStore(HashEmbedder(), tmp_path)
    for i in range(12):  # shards on disk, loaded (np.load) by every thread at first use
        warm.embed([f"old text {i}"])
    embedder = SlowHashEmbedder()
    store = EmbeddingStore(embedder, tmp_path)
    queries = [[f"old text {i % 12}", f"new text {i % 4}"] for i in range(16)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(lambda q: store.embed(q, persist=persisted(q)), queries))
    assert embedder.calls == 4  # the four new texts, each embedded once
    reference = HashEmbedder()
    for query, vectors in zip(queries, results, strict=True):
        assert np.allclose(vectors, reference.encode(query))


def persisted(query: list[str]) -> bool:
    """Half the callers keep their new vectors, half ask one-off (as queries do)."""
    return query[1] in {"new text 0", "new text 1"}


class GatedHashEmbedder(HashEmbedder):
    """Holds the batch that holds `held` inside `encode` until `release` is set."""

    def __init__(self, held: str) -> None:
        super().__init__()
        self.held, self.inside, self.release = held, threading.Event(), threading.Event()

    def encode(self, texts: Sequence[str], progress: bool = False) -> np.ndarray:
        if self.held in texts:
            self.inside.set()
            assert self.release.wait(10)
        return super().encode(texts, progress)


def test_a_query_is_not_held_up_by_another_callers_memory_build(tmp_path: Path) -> None:
    """One caller embeds a conversation's entries (persisted); meanwhile another caller's
    query and a third caller's other entries are embedded, not queued behind it."""
    embedder = GatedHashEmbedder(held="entry of conversation a")
    store = EmbeddingStore(embedder, tmp_path)
    with ThreadPoolExecutor(max_workers=3) as pool:
        build = pool.submit(store.embed, ["entry of conversation a", "another entry of a"])
        assert embedder.inside.wait(10)
        query = pool.submit(store.embed, ["what did Ann decide?"], persist=False)
        other = pool.submit(store.embed, ["entry of conversation b"])
        assert query.result(timeout=5).shape == (1, 256)
        assert other.result(timeout=5).shape == (1, 256)
        assert not build.done()
        embedder.release.set()
        assert build.result(timeout=5).shape == (2, 256)
    fresh = EmbeddingStore(HashEmbedder(), tmp_path)  # both persisted batches are on disk
    fresh.embed(["entry of conversation a", "another entry of a", "entry of conversation b"])
    assert fresh.embedded == 0


def test_queries_are_written_a_shard_at_a_time_and_found_by_a_later_process(
        tmp_path: Path) -> None:
    store = EmbeddingStore(HashEmbedder(), tmp_path)
    queries = [f"what did person {i} decide?" for i in range(QUERY_SHARD + 3)]
    for query in queries:  # one at a time, as questions ask them
        store.embed([query], persist=False)
    shards = list(store.directory.glob("shard-*.npz"))
    assert len(shards) == 1  # the first QUERY_SHARD, together; the last 3 not yet
    later = EmbeddingStore(HashEmbedder(), tmp_path)
    later.embed(queries[:QUERY_SHARD], persist=False)
    assert later.embedded == 0
    later.embed(queries[QUERY_SHARD:], persist=False)
    assert later.embedded == 3
    assert np.allclose(later.embed(queries[:2], persist=False), store.embed(queries[:2]))


def test_queries_fewer_than_a_shard_are_written_after_a_while(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_embed, "QUERY_FLUSH_S", 0.2)
    store = EmbeddingStore(HashEmbedder(), tmp_path)
    store.embed(["what did Ann decide?"], persist=False)
    store.embed(["when did Bo leave?"], persist=False)
    assert not list(store.directory.glob("shard-*.npz"))  # not at once
    time.sleep(1.0)
    assert len(list(store.directory.glob("shard-*.npz"))) == 1  # both, in one shard
    later = EmbeddingStore(HashEmbedder(), tmp_path)
    later.embed(["what did Ann decide?", "when did Bo leave?"], persist=False)
    assert later.embedded == 0


def test_a_process_writes_its_last_queries_when_it_exits(tmp_path: Path) -> None:
    script = (f"from pathlib import Path\nfrom tests.hashed_embedder import HashEmbedder\n"
              f"from tmem_core.retrieval import EmbeddingStore\n"
              f"store = EmbeddingStore(HashEmbedder(), Path({str(tmp_path)!r}))\n"
              f"store.embed(['what did Ann decide?'], persist=False)\n")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT)
    later = EmbeddingStore(HashEmbedder(), tmp_path)
    later.embed(["what did Ann decide?"], persist=False)
    assert later.embedded == 0
