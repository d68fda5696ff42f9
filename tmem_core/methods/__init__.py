"""Memory methods: one interface, one registry.

A method is a decorated factory (`@method`, see `_registry`) in the module that implements
it; baselines live in `baselines`, T-MEM in `tmem`, T2Mem in `t2mem`, external memory
systems (`memory_system`) in `external`. `build_method` makes
one by name for a run, `evidence_recall_at_k` scores the ranked ones without an LLM and
T-MEM's configurations with the LLM that selects their evidence.
"""

from tmem_core.methods._base import Evidence, evidence
from tmem_core.methods._context import LLM, MESSAGE_ID, Context, ContextMethod, render_message
from tmem_core.methods._flat import ranked
from tmem_core.methods._reasoning import CHAIN, boxed_answer, final_answer, reasoning_budget
from tmem_core.methods._recall import evidence_recall_at_k
from tmem_core.methods._record import Record, record_columns
from tmem_core.methods._registry import (
    Check,
    MethodEnv,
    MethodSpec,
    Show,
    check_params,
    get_method,
    method,
    method_label,
    method_names,
    refuse_renamed,
)

__all__ = [
    "CHAIN",
    "LLM",
    "MESSAGE_ID",
    "Check",
    "Context",
    "ContextMethod",
    "Evidence",
    "MethodEnv",
    "MethodSpec",
    "Record",
    "Show",
    "boxed_answer",
    "check_params",
    "evidence",
    "evidence_recall_at_k",
    "final_answer",
    "get_method",
    "method",
    "method_label",
    "method_names",
    "ranked",
    "reasoning_budget",
    "record_columns",
    "refuse_renamed",
    "render_message",
]
