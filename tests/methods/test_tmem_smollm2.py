"""The whole T-MEM chain with the embedded SmolLM2: whatever it answers, the context is a valid
forest within budget, and a re-run is served from the request cache."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hashed_embedder import HashEmbedder
from tmem_core.benchmarks import LoadRequest, build
from tmem_core.llm import LLMClient, count_tokens, open_client
from tmem_core.methods.tmem import Built, DiscoveryConfig, TMem, TMemConfig
from tmem_core.methods.tmem._validate import context_problems
from tmem_core.retrieval import IndexStore, conversations_from_table
from tmem_core.schema import Question, questions_from_table

pytestmark = pytest.mark.slow

BUDGET = 300
CONFIG = TMemConfig(DiscoveryConfig(max_candidates=10))


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LLMClient]:
    cache = tmp_path_factory.mktemp("llm")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("TMEM_CACHE_DIR", str(cache))
        with open_client("smollm2") as llm:
            yield llm


def _method_and_questions(name: str, request: LoadRequest, qids: tuple[int, ...],
                          root: Path) -> tuple[TMem, list[Question]]:
    prepared = build(name, request)
    store = IndexStore(conversations_from_table(prepared.messages), HashEmbedder(), root)
    questions = questions_from_table(prepared.questions)
    return TMem(store, CONFIG, top_k=6, budget=BUDGET), [questions[k] for k in qids]


@pytest.mark.parametrize("dataset", ["locomo", "synthetic"])
def test_smollm2_chain_gives_valid_forests_under_budget(
        dataset: str, client: LLMClient, locomo_path: Path, tmp_path: Path) -> None:
    request = (LoadRequest(source=locomo_path) if dataset == "locomo"
               else LoadRequest(size=400, variant="native-revisions"))
    method, questions = _method_and_questions(dataset, request, (0, 1), tmp_path)
    count = functools.partial(count_tokens, client.backbone)
    for q in questions:
        found = method.retrieve(q)
        context = method.construct(q, found, client, count)
        assert context_problems(context, BUDGET, count) == []
        assert context.ids and context.kind == "forest"
        assert isinstance(context.record, Built)
        llm = context.record.llm
        assert llm["select"].calls >= 1 and llm["structure"].calls >= 1
        again = method.construct(q, found, client, count)
        assert again.text == context.text and isinstance(again.record, Built)
        assert all(s.cached == s.calls - s.failed for s in again.record.llm.values())
