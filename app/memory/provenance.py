"""A memory's history told as a person reads it (我的记忆 and the audit page's 来源与历史).

The journal answers with events; a person asks where a memory came from, whether the agent keeps
re-confirming it and what was changed. This groups the events that way and names each cause's
project, so the page only renders.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from difflib import SequenceMatcher

from app.memory.events import EventType
from app.memory.journal import Entry
from app.sessions.models import PlatformSession

ORIGINS = (EventType.CREATED, EventType.CONSOLIDATED)
# A change between texts this long (together) is shown as what changed, not old and new whole.
DIFF_FROM = 120
# Characters of unchanged text kept on each side of a change; longer stretches are elided.
DIFF_CONTEXT = 16
# What a change is made of: a Latin word (or number) whole, a run of spaces, any other character
# alone (Chinese has no spaces to split words on). A diff by characters shows 「wrap」→「WRAPPING」
# as 「wr」+「WRAPPING」 and a screen reader says 「wrWRAPPING」.
TOKEN = re.compile(r"[0-9A-Za-z\u00C0-\u024F_]+|\s+|.", re.S)


@dataclass(frozen=True)
class Piece:
    """Part of a change: `same`, `gone` (removed), `new` (added), or `skip` (unchanged, elided)."""

    kind: str
    text: str


def _within(tokens: Sequence[str], budget: int) -> str:
    """The first tokens whose text fits in `budget` characters (a word is never cut)."""
    kept = ""
    for token in tokens:
        if len(kept) + len(token) > budget:
            break
        kept += token
    return kept


def changed_pieces(before: str, after: str) -> list[Piece]:
    """What changed from `before` to `after`, word by word (a Chinese character is a word), with
    long unchanged stretches cut to their ends."""
    old, new = TOKEN.findall(before), TOKEN.findall(after)
    pieces: list[Piece] = []
    opcodes = SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    for n, (tag, i1, i2, j1, j2) in enumerate(opcodes):
        if tag == "equal":
            text = "".join(old[i1:i2])
            head = _within(old[i1:i2], DIFF_CONTEXT) if n > 0 else ""
            tail = _within(old[i1:i2][::-1], DIFF_CONTEXT)[::-1] if n < len(opcodes) - 1 else ""
            if len(text) <= len(head) + len(tail) + 1:
                pieces.append(Piece("same", text))
                continue
            pieces += [Piece("same", head)] if head else []
            pieces.append(Piece("skip", "…"))
            pieces += [Piece("same", tail)] if tail else []
            continue
        if i2 > i1:
            pieces.append(Piece("gone", "".join(old[i1:i2])))
        if j2 > j1:
            pieces.append(Piece("new", "".join(new[j1:j2])))
    return pieces


@dataclass(frozen=True)
class Provenance:
    origin: Entry | None  # CREATED or CONSOLIDATED; None for a memory older than the journal
    confirmations: int  # TOUCHED: extraction found the same fact again
    last_confirmed: datetime | None
    changes: Sequence[Entry]  # every other event, oldest first
    projects: dict[int, str | None]  # session id → the project it was reported in

    def project_of(self, entry: Entry) -> str | None:
        return None if entry.session_id is None else self.projects.get(entry.session_id)

    def diff(self, entry: Entry) -> list[Piece] | None:
        """A rewording shown as what changed, when the texts are too long to read whole."""
        before, after = entry.before, entry.after
        if not isinstance(before, str) or after is None or len(before) + len(after) < DIFF_FROM:
            return None
        return changed_pieces(before, after)


def tell(user_id: int, entries: Sequence[Entry]) -> Provenance:
    """`entries` (oldest first) grouped for reading; one query for the sessions' projects."""
    origin = next((e for e in entries if e.type in ORIGINS), None)
    touches = [e for e in entries if e.type == EventType.TOUCHED]
    changes = [e for e in entries if e is not origin and e.type != EventType.TOUCHED]
    projects = PlatformSession.projects_of(
        user_id, {e.session_id for e in entries if e.session_id is not None})
    return Provenance(origin, len(touches), touches[-1].at if touches else None, changes,
                      projects)
