"""A request's schema is checked against its meta-schema once per skeleton, and a schema is
refused exactly when its skeleton is."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tmem_core.llm import ChatRequest
from tmem_core.llm._types import (
    Usage,
    _check_skeleton,
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


def test_schemas_that_differ_in_ids_only_are_checked_once() -> None:
    _check_skeleton.cache_clear()
    for first in range(1, 40, 3):  # other questions: other local ids, same shape
        ChatRequest.from_prompt("q", schema=_links([f"m{first + i}" for i in range(5)]))
    assert _check_skeleton.cache_info().misses == 1
    ChatRequest.from_prompt("q", schema=_links([f"m{i}" for i in range(6)]))  # another shape
    assert _check_skeleton.cache_info().misses == 2


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
