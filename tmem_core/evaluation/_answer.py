"""Answer prompts: one per context kind, with the benchmark's answer format."""

from __future__ import annotations

from tmem_core.evaluation._protocols import Protocol
from tmem_core.prompts import Prompt, load_prompt
from tmem_core.schema import Option, Question

CONTEXT_PROMPTS = {"flat": "answer/flat", "forest": "answer/forest", "memory": "answer/memory"}


def question_block(question: Question) -> str:
    lines = [f"Question: {question.question}"]
    if question.asking_user:
        lines.append(f"Asked by: {question.asking_user}")
    if question.question_time:
        lines.append(f"Asked on: {question.question_time:%d %B %Y, %H:%M} UTC")
    return "\n".join(lines)


def format_instruction(question: Question, protocol: Protocol,
                       options: tuple[Option, ...] | None) -> str:
    """The benchmark-specific answer format: letters, dates, the abstention phrase where the
    benchmark's protocol asks for it (by the question's category, never by its gold)."""
    if options:
        listed = "\n".join(f"{o.label}. {o.text}" for o in options)
        return f"Options:\n{listed}\nReply with the letter of the one correct option only."
    parts = ["Answer in a short phrase."]
    if question.category in protocol.temporal_categories:
        parts.append("If the question asks when, give the date as day, month name and year, "
                     "worked out from the message timestamps.")
    if protocol.abstention_phrase and (protocol.abstention_categories is None
                                       or question.category in protocol.abstention_categories):
        parts.append(f"If the evidence does not contain the answer, reply exactly: "
                     f"{protocol.abstention_phrase}")
    return " ".join(parts)


def answer_prompt(question: Question, context_kind: str, context: str, protocol: Protocol,
                  options: tuple[Option, ...] | None = None
                  ) -> tuple[list[dict[str, str]], Prompt]:
    """Chat messages asking the answer model, and the prompt used (for its hash).

    `options` are the question's choices (multiple choice only); no other gold field exists
    in this signature, so none can reach the prompt.
    """
    try:
        prompt = load_prompt(CONTEXT_PROMPTS[context_kind])
    except KeyError:
        raise ValueError(f"unknown context kind {context_kind!r}; known: "
                         f"{', '.join(CONTEXT_PROMPTS)}") from None
    messages = prompt.render(context=context, question_block=question_block(question),
                             format_instruction=format_instruction(question, protocol, options))
    return messages, prompt
