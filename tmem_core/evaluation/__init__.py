"""Evaluation: deterministic metrics, answer prompts, judges and evidence recall."""

from tmem_core.evaluation._answer import CONTEXT_PROMPTS, answer_prompt, question_block
from tmem_core.evaluation._controls import KINDS, SUPERSEDED_KEY, Control, ControlPool, Rules
from tmem_core.evaluation._leaks import GUARDED_STAGES, gold_leaks, gold_strings, ids_in
from tmem_core.evaluation._metrics import (
    choice_correct,
    exact_match,
    locomo_f1,
    normalise,
    says_not_available,
    stemmer,
)
from tmem_core.evaluation._protocols import Protocol, one_judge
from tmem_core.evaluation._recall import GROUPS_KEY, RecallTable, evidence_recall, recall_scorable
from tmem_core.evaluation._verdict import JudgeCall

__all__ = [
    "CONTEXT_PROMPTS",
    "GROUPS_KEY",
    "GUARDED_STAGES",
    "KINDS",
    "SUPERSEDED_KEY",
    "Control",
    "ControlPool",
    "JudgeCall",
    "Protocol",
    "RecallTable",
    "Rules",
    "answer_prompt",
    "choice_correct",
    "evidence_recall",
    "exact_match",
    "gold_leaks",
    "gold_strings",
    "ids_in",
    "locomo_f1",
    "normalise",
    "one_judge",
    "question_block",
    "recall_scorable",
    "says_not_available",
    "stemmer",
]
