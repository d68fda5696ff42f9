"""The shared method interface: evidence for one question under a budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from tmem_core import TmemError
from tmem_core.schema import Question


@dataclass(frozen=True)
class Evidence:
    """Message ids a method selected for a question, in presentation order.

    `payload` is what the method's construction needs of its retrieval, of the type the
    method registered as `evidence` (it travels between the stages as a record column);
    `detail` is what the method found, for inspection in this process only (e.g. T-MEM's
    `Discovery` in tests and tuning); it is never stored.
    """

    qid: str
    method: str
    ids: tuple[str, ...]
    payload: object | None = None
    detail: object | None = None


class EvidenceMethod(Protocol):
    """Plain Python: call it on one question; it reads only public question fields."""

    @property
    def name(self) -> str: ...

    def __call__(self, question: Question, top_k: int) -> Evidence:
        """The question's evidence, at most `top_k` messages (the grid's Top-k)."""
        ...


def evidence(method: str, question: Question, ids: Sequence[str],
             payload: object | None = None, detail: object | None = None) -> Evidence:
    return Evidence(question.qid, method, tuple(ids), payload, detail)


_Built = TypeVar("_Built")


def prepared(memories: Mapping[str, _Built], method: str, conv_id: str) -> _Built:
    """The memory `prepare` built for `conv_id`, else a `TmemError`."""
    try:
        return memories[conv_id]
    except KeyError:
        raise TmemError(f"{method}: conversation {conv_id!r} is not prepared; call "
                          f"prepare({conv_id!r}, llm) first (in this process)") from None
