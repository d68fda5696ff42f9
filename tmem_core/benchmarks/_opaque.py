"""Harness-assigned message and session ids: what a model sees carries nothing of the source.

Source ids can encode gold: LongMemEval names its evidence sessions `answer_<hash>` and its
abstention questions `<id>_abs`. Every prepared benchmark therefore renames its messages
`m<n>` and its sessions `s<n>` (numbered in conversation order); the source ids stay in each
message's `meta` (`source_id`, `source_session`) for the reader, and gold evidence follows the
renaming. Conversation ids are the adapters' own, never derived from gold.
"""

from __future__ import annotations

import dataclasses
import json

from tmem_core.benchmarks._registry import LoadedBenchmark
from tmem_core.schema import Message


def opaque_ids(loaded: LoadedBenchmark) -> LoadedBenchmark:
    """`loaded` with harness message and session ids, gold evidence renamed alike."""
    ids = {m.msg_id: f"m{n}" for n, m in enumerate(loaded.messages)}
    sessions: dict[tuple[str, str], str] = {}
    for m in loaded.messages:
        if m.session_id is not None:
            sessions.setdefault((m.conv_id, m.session_id), f"s{len(sessions)}")
    messages = [_renamed(m, ids, sessions) for m in loaded.messages]
    questions = [(q, dataclasses.replace(g, evidence_ids=tuple(ids[e] for e in g.evidence_ids
                                                               if e in ids)))
                 for q, g in loaded.questions]
    return dataclasses.replace(loaded, messages=messages, questions=questions)


def _renamed(message: Message, ids: dict[str, str], sessions: dict[tuple[str, str], str]
             ) -> Message:
    meta = json.loads(message.meta) if message.meta else {}
    meta["source_id"] = message.msg_id
    session = None
    if message.session_id is not None:
        meta["source_session"] = message.session_id
        session = sessions[(message.conv_id, message.session_id)]
    reply_to = ids.get(message.reply_to) if message.reply_to else None
    return dataclasses.replace(message, msg_id=ids[message.msg_id], session_id=session,
                               reply_to=reply_to, meta=json.dumps(meta, sort_keys=True))
