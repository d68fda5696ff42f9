"""A request's schema is checked against its meta-schema once per skeleton, and a schema is
refused exactly when its skeleton is."""

from __future__ import annotations

import copy
import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jsonschema
import pytest

from tmem_core.llm import ChatRequest, _types
from tmem_core.llm._types import (
    Usage,
    object_schema,
    output_response,
    schema_skeleton,
)


def _links(ids: list[str]) -> dict[str, Any]:
    """A structuring step's schema: each id names an earlier id as its parent."""
    return object_schema({"links": object_schema({
        ident: object_schema({"parent": {"type": "string", "enum": [*ids[:k], "none"]},
                              "relation": {"type": "string", "enum": ["UPDATE", "SUPPORT"]}})
        for k, ident in enumerate(ids)})})


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The skeletons checked against their meta-schema, from an empty memory."""
    checked: list[str] = []
    check = _types._check_skeleton

    def counting(skeleton: str) -> None:
        checked.append(skeleton)
        time.sleep(0.01)  # a check takes a while: other threads meet the same skeleton
        check(skeleton)

    monkeypatch.setattr(_types, "_check_skeleton", counting)
    monkeypatch.setattr(_types, "_VALID_SKELETONS", set())
    return checked


def test_schemas_that_differ_in_ids_only_are_checked_once(checks: list[str]) -> None:
    for first in range(1, 40, 3):  # other questions: other local ids, same shape
        ChatRequest.from_prompt("q", schema=_links([f"m{first + i}" for i in range(5)]))
    assert len(checks) == 1
    ChatRequest.from_prompt("q", schema=_links([f"m{i}" for i in range(6)]))  # another shape
    assert len(checks) == 2


def test_a_skeleton_met_by_many_threads_at_once_is_checked_once(checks: list[str]) -> None:
    start = threading.Barrier(16)

    def ask(first: int) -> None:
        start.wait()
        ChatRequest.from_prompt("q", schema=_links([f"m{first + i}" for i in range(7)]))

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(ask, range(16)))
    assert len(checks) == 1


@pytest.mark.parametrize("schema", [
    {"type": "no-such-type"},
    {"type": "object", "properties": {"a": {"type": 5}}},
    {"type": "string", "enum": "not a list"},
    {"type": "object", "required": "a"},
    {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a", "a"]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "enum": ["x", "x"]},
    {"$schema": "http://json-schema.org/draft-04/schema#", "enum": []},
    {"type": "object", "properties": {"a": {"minLength": -1}}},
])
def test_a_schema_is_refused_exactly_when_its_skeleton_is(schema: dict[str, Any]) -> None:
    validator = jsonschema.validators.validator_for(schema)
    with pytest.raises(jsonschema.SchemaError):
        validator.check_schema(schema)
    with pytest.raises(jsonschema.SchemaError):
        validator.check_schema(schema_skeleton(schema))
    with pytest.raises(jsonschema.SchemaError):
        ChatRequest.from_prompt("q", schema=schema)


def test_outputs_are_validated_against_the_schema_not_its_skeleton() -> None:
    schema = _links(["m1", "m2"])
    good = '{"links": {"m1": {"parent": "none", "relation": "UPDATE"}, ' \
           '"m2": {"parent": "m1", "relation": "SUPPORT"}}}'
    assert output_response(good, Usage(1, 1), 0.0, schema).ok
    wrong_id = good.replace('"parent": "m1"', '"parent": "m7"')
    answer = output_response(wrong_id, Usage(1, 1), 0.0, schema)
    assert answer.error_kind == "invalid_output" and "m7" in (answer.error or "")


def test_copies_of_a_request_do_not_walk_its_schema_again(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    walked: list[object] = []
    skeleton = schema_skeleton

    def counting(node: Any) -> Any:
        walked.append(node)
        return skeleton(node)

    def walks(node: object) -> int:
        return sum(walked_node is node for walked_node in walked)

    monkeypatch.setattr("tmem_core.llm._types.schema_skeleton", counting)
    schema = _links(["m1", "m2", "m3"])
    request = ChatRequest.from_prompt("q", schema=schema)
    assert walks(schema) == 1
    dataclasses.replace(request, stage="construct", qid="q1", priority=3)
    assert walks(schema) == 1
    equal = copy.deepcopy(schema)  # another object: checked on its own
    ChatRequest.from_prompt("q", schema=equal)
    assert walks(equal) == 1


def test_a_refused_schema_is_refused_again() -> None:
    schema = {"type": "object", "properties": {"a": {"type": 5}}}
    for _ in range(2):
        with pytest.raises(jsonschema.SchemaError):
            ChatRequest.from_prompt("q", schema=schema)
