"""The canonical data model: messages and questions as dataclasses and Arrow schemas.

Evaluation-only fields (gold answer, gold evidence, options, answer kind) live in
`Gold`, never in `Question`; `read_questions` projects them away so that no method
can see them.
"""

from tmem_core.schema._tables import (
    GOLD_COLUMNS,
    PUBLIC_QUESTION_COLUMNS,
    SCHEMA_VERSION,
    Gold,
    Message,
    Option,
    Question,
    gold_from_table,
    messages_from_table,
    messages_to_table,
    questions_from_table,
    questions_to_table,
)
from tmem_core.schema._validate import validate_tables

__all__ = [
    "GOLD_COLUMNS",
    "PUBLIC_QUESTION_COLUMNS",
    "SCHEMA_VERSION",
    "Gold",
    "Message",
    "Option",
    "Question",
    "gold_from_table",
    "messages_from_table",
    "messages_to_table",
    "questions_from_table",
    "questions_to_table",
    "validate_tables",
]
