"""Evaluation: deterministic metrics, answer prompts, judges and evidence recall."""

from tmem_core.evaluation._answer import answer_prompt, format_instruction, question_block
from tmem_core.evaluation._controls import (
    KINDS,
    Control,
    ControlPool,
    Rules,
    equivalent,
    paraphrase,
    shift_dates,
)
from tmem_core.evaluation._leaks import (
    GUARDED_STAGES,
    gold_leaks,
    gold_strings,
    ids_in,
    meta_kind,
)
from tmem_core.evaluation._metrics import (
    choice_correct,
    choice_letter,
    exact_match,
    locomo_f1,
    normalise,
    partial_f1,
    says_not_available,
    stemmer,
    token_f1,
)
from tmem_core.evaluation._protocols import Protocol, TokenF1, one_judge
from tmem_core.evaluation._recall import RecallTable, evidence_recall, recall_scorable
from tmem_core.evaluation._verdict import parse_verdict

__all__ = [
    "GUARDED_STAGES",
    "KINDS",
    "Control",
    "ControlPool",
    "Protocol",
    "RecallTable",
    "Rules",
    "TokenF1",
    "answer_prompt",
    "choice_correct",
    "choice_letter",
    "equivalent",
    "evidence_recall",
    "exact_match",
    "format_instruction",
    "gold_leaks",
    "gold_strings",
    "ids_in",
    "locomo_f1",
    "meta_kind",
    "normalise",
    "one_judge",
    "paraphrase",
    "parse_verdict",
    "partial_f1",
    "question_block",
    "recall_scorable",
    "says_not_available",
    "shift_dates",
    "stemmer",
    "token_f1",
]
