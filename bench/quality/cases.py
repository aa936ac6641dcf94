"""The labelled set: one finished task per case, the memories the user has, and what a good
extraction does with it.

Cases live in `bench/quality/cases/*.jsonl`, one JSON object a line:

    {"id": "zh-user-01", "kind": "user", "lang": "zh", "project": "mao",
     "memories": [{"ref": "a", "scope": "USER", "source": "AUTO", "status": "ACTIVE",
                   "content": "…", "match": [["…"]]}],
     "user": "…", "assistant": "…",
     "expect": [{"action": "insert", "scope": "USER", "match": [["中文", "Chinese"], ["报告"]]}],
     "optional": [], "why": "…"}

`expect` lists what must happen (nothing at all when empty); `optional` what may happen without
being wrong (e.g. a new row that paraphrases a MANUAL one the model is never shown, D13).
An effect is an `insert` (scope USER, PROJECT or either, as a list), a `touch` or an `update`
of a seeded row by its `ref`. A stored content "says" an effect when it contains one alternative
of every `match` group (case, width and spaces ignored): a fixed rule, so equal answers always
score the same. A DISMISSED row's `match` says what a stored row must not say.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.memory.rules import EXTRACT_MIN_USER_MESSAGE, length, normalize, valid_project_key

CASES_DIR = Path(__file__).resolve().parent / "cases"
# The labelled set is written for the default bot keys (SPEC §2); the runner uses these.
BOT_PROJECT_KEYS = ("weixin-bot",)

KINDS = ("nothing", "user", "project", "touch", "update", "dismissed", "manual",
         "no_project_key", "short")
ACTIONS = ("insert", "touch", "update")
SCOPES = ("USER", "PROJECT")
SOURCES = ("AUTO", "MANUAL", "CONSOLIDATED")
STATUSES = ("ACTIVE", "DISMISSED")

Match = tuple[tuple[str, ...], ...]


class CaseError(ValueError):
    """A case that cannot be scored as written."""


def _folded(text: str) -> str:
    """What `says` compares: width (NFKC), case and every space ignored."""
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def says(content: str, match: Match) -> bool:
    """True when `content` contains one alternative of every group of `match`."""
    folded = _folded(content)
    return bool(match) and all(any(_folded(alt) in folded for alt in group) for group in match)


@dataclass(frozen=True)
class Memory:
    """A row the user has before the task ends."""

    ref: str
    scope: str
    project_key: str  # "" for USER rows
    source: str
    status: str
    content: str
    match: Match = ()  # DISMISSED rows: what a learnt row must not say


@dataclass(frozen=True)
class Effect:
    """One change a good extraction makes."""

    action: str
    scopes: tuple[str, ...] = ()  # insert: where the row may go
    ref: str | None = None  # touch / update: the seeded row
    match: Match = ()  # insert / update: what the stored words must say


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    lang: str
    project_key: str | None
    memories: tuple[Memory, ...]
    user: str
    assistant: str
    expect: tuple[Effect, ...]
    optional: tuple[Effect, ...] = ()
    why: str = ""
    refs: dict[str, Memory] = field(default_factory=dict, compare=False, repr=False)

    @property
    def decision(self) -> str:
        """The expected decision in one word: `nothing`, or the actions joined by `+`."""
        return "+".join(sorted({e.action for e in self.expect})) or "nothing"

    @property
    def project_valid(self) -> bool:
        return valid_project_key(self.project_key, BOT_PROJECT_KEYS) is not None


def _match(raw: Any, where: str) -> Match:
    if raw is None:
        return ()
    if not (isinstance(raw, list) and raw and all(
            isinstance(g, list) and g and all(isinstance(a, str) and a.strip() for a in g)
            for g in raw)):
        raise CaseError(f"{where}: match must be a non-empty list of non-empty string lists")
    return tuple(tuple(group) for group in raw)


def _memory(raw: dict[str, Any], project_key: str | None, where: str) -> Memory:
    scope, source, status = raw.get("scope"), raw.get("source"), raw.get("status", "ACTIVE")
    if scope not in SCOPES or source not in SOURCES or status not in STATUSES:
        raise CaseError(f"{where}: bad scope, source or status")
    key = raw.get("project", project_key) if scope == "PROJECT" else ""
    if scope == "PROJECT" and not key:
        raise CaseError(f"{where}: a PROJECT memory needs a project key")
    content = normalize(raw.get("content") or "")
    if not content:
        raise CaseError(f"{where}: empty content")
    return Memory(raw["ref"], scope, key, source, status, content,
                  _match(raw.get("match"), where))


def _effect(raw: dict[str, Any], where: str) -> Effect:
    action = raw.get("action")
    if action not in ACTIONS:
        raise CaseError(f"{where}: unknown action {action!r}")
    if action == "insert":
        scopes = raw.get("scope")
        scopes = tuple(scopes) if isinstance(scopes, list) else (scopes,)
        if not scopes or any(s not in SCOPES for s in scopes):
            raise CaseError(f"{where}: an insert needs a scope")
        match = _match(raw.get("match"), where)
        if not match:
            raise CaseError(f"{where}: an insert needs a match")
        return Effect(action, scopes=scopes, match=match)
    if not raw.get("ref"):
        raise CaseError(f"{where}: a {action} needs a ref")
    return Effect(action, ref=raw["ref"], match=_match(raw.get("match"), where))


def _check(case: Case) -> None:
    where = case.id
    if case.kind not in KINDS or case.lang not in ("zh", "en"):
        raise CaseError(f"{where}: unknown kind or lang")
    short = length(normalize(case.user)) < EXTRACT_MIN_USER_MESSAGE
    if short != (case.kind == "short"):
        raise CaseError(f"{where}: kind 'short' is exactly the messages under the D11 threshold")
    for effect in case.expect + case.optional:
        if effect.action == "insert":
            if "PROJECT" in effect.scopes and not case.project_valid:
                raise CaseError(f"{where}: without a valid project key facts are stored as USER")
            continue
        memory = case.refs.get(effect.ref)
        if memory is None:
            raise CaseError(f"{where}: unknown ref {effect.ref!r}")
        if memory.source == "MANUAL" or memory.status != "ACTIVE":
            raise CaseError(f"{where}: only ACTIVE machine-made rows can be touched or updated")
        if memory.scope == "PROJECT" and memory.project_key != (case.project_key or ""):
            raise CaseError(f"{where}: another project's row is never shown to the model")


def parse_case(raw: dict[str, Any]) -> Case:
    """One case from its JSON object, checked (CaseError when it cannot be scored)."""
    where = str(raw.get("id"))
    try:
        project_key = raw.get("project")
        memories = tuple(_memory(m, project_key, f"{where} memory {i}")
                         for i, m in enumerate(raw.get("memories") or []))
        refs = {m.ref: m for m in memories}
        if len(refs) != len(memories):
            raise CaseError(f"{where}: refs must be unique")
        case = Case(id=raw["id"], kind=raw["kind"], lang=raw["lang"], project_key=project_key,
                    memories=memories, user=raw["user"], assistant=raw["assistant"],
                    expect=tuple(_effect(e, where) for e in raw.get("expect") or []),
                    optional=tuple(_effect(e, where) for e in raw.get("optional") or []),
                    why=raw.get("why", ""), refs=refs)
    except KeyError as exc:
        raise CaseError(f"{where}: missing {exc}") from None
    _check(case)
    return case


def load(paths: Sequence[Path] | None = None) -> list[Case]:
    """Every case of `paths` (default: the labelled set), in file and line order."""
    files = sorted(CASES_DIR.glob("*.jsonl")) if paths is None else list(paths)
    cases: list[Case] = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    cases.append(parse_case(json.loads(line)))
                except (ValueError, TypeError) as exc:
                    raise CaseError(f"{path.name}:{number}: {exc}") from None
    ids = [c.id for c in cases]
    if len(set(ids)) != len(ids):
        raise CaseError("case ids must be unique")
    return cases
