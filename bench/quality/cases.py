"""The labelled set: one finished task per case, the memories the user has, and what a good
extraction does with it.

Cases live in `bench/quality/cases/*.jsonl`, one JSON object a line:

    {"id": "zh-user-01", "kind": "user", "lang": "zh", "project": "mao",
     "memories": [{"ref": "a", "scope": "USER", "source": "AUTO", "status": "ACTIVE",
                   "content": "…", "match": [["…"]]}],
     "background": 40,
     "user": "…", "assistant": "…",
     "expect": [{"action": "insert", "scope": "USER", "must": [["中文", "Chinese"], ["报告"]],
                 "must_not": ["周报"], "polarity": "+"}],
     "optional": [], "forbidden": [], "why": "…"}

`expect` lists what must happen (nothing at all when empty); `optional` what may happen without
being wrong (e.g. a new row that paraphrases a MANUAL one the model is never shown, D13).
An effect is an `insert` (scope USER, PROJECT or either, as a list), a `touch` or an `update`
of a seeded row by its `ref` (`"or_insert": true`: a new row of that scope is as good). Stored
words "say" an effect (`verdict`) when they contain one alternative of every `must` group (case,
width and spaces ignored) and none of these:
- a `must_not` phrase of the effect (e.g. the one-off detail of the task);
- a one-off marker ("这次", "this time", …: a long-term memory has no "this time");
- the meaning inverted: with polarity "+" (the default) an occurrence of the first group's
  words comes right after a negation ("does NOT want Vitest"); with "-" none does (the user's
  "no emoji" stored as "emoji");
- the raw message: nearly all of the user's message copied verbatim.
A fixed rule, so equal answers always score the same. A DISMISSED row's `match` says what a
stored row must not say; `forbidden` what no row of the case may say at all (a password, an
injected "I am admin"). `background` adds that many unrelated machine-made rows (`background`
module), so the model chooses among a realistic comparison set.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.memory.rules import EXTRACT_MIN_USER_MESSAGE, length, normalize, valid_project_key
from bench.quality import background

CASES_DIR = Path(__file__).resolve().parent / "cases"
# The labelled set is written for the default bot keys (SPEC §2); the runner uses these.
BOT_PROJECT_KEYS = ("weixin-bot",)

KINDS = ("nothing", "user", "project", "touch", "update", "dismissed", "manual",
         "no_project_key", "short", "correction", "third_party", "sensitive", "injection",
         "sarcasm", "code_switch", "long_session", "multi_fact")
ACTIONS = ("insert", "touch", "update")
SCOPES = ("USER", "PROJECT")
SOURCES = ("AUTO", "MANUAL", "CONSOLIDATED")
STATUSES = ("ACTIVE", "DISMISSED")
POLARITIES = ("+", "-", "any")
BACKGROUND_MAX = 200

Match = tuple[tuple[str, ...], ...]

# Words of a task, not of a long-term fact: a memory that says them kept the one-off detail.
ONE_OFF = ("这次", "本次", "这一次", "今天", "刚才", "this time", "today", "just now",
           "right now")
# A negation that governs the words right after it, in either language.
_NEGATION = re.compile(
    r"(?:\b(?:not|never|no|no longer|doesn't|don't|does not|do not|dislikes?|hates?|avoids?|"
    r"refuses?|stop using|without)\b|不要|不想|不用|不喜欢|不希望|不再|不使用|别|拒绝|避免|禁止|"
    r"讨厌|不爱|不吃|不喝|不加|不碰|不含|从不|绝不)", re.IGNORECASE)
_CLAUSE_END = re.compile(r"[,.;!?,。;!?\n]")
NEGATION_WINDOW = 12  # code points before the words, within their clause
# Stored words this close to the whole user message (folded), or this long and copied from it,
# are the message itself, not a memory.
RAW_SHARE = 0.9
RAW_LENGTH = 60


class CaseError(ValueError):
    """A case that cannot be scored as written."""


def folded(text: str) -> str:
    """What `says` compares: width (NFKC), case and every space ignored."""
    return background.fold(text)


def says(content: str, match: Match) -> bool:
    """True when `content` contains one alternative of every group of `match`."""
    flat = folded(content)
    return bool(match) and all(any(folded(alt) in flat for alt in group) for group in match)


def negated_at(text: str, start: int) -> bool:
    """True when a negation comes within NEGATION_WINDOW code points before `start`, in the same
    clause ("does NOT want Vitest", "不要使用 emoji")."""
    before = text[max(0, start - NEGATION_WINDOW):start]
    clause = _CLAUSE_END.split(before)[-1]
    return _NEGATION.search(clause) is not None


def polarity_of(content: str, words: Sequence[str]) -> set[bool]:
    """For every occurrence of one of `words` in `content`: is it negated? (empty: none occurs)"""
    text = unicodedata.normalize("NFKC", content).casefold()
    seen: set[bool] = set()
    for word in words:
        needle = unicodedata.normalize("NFKC", word).casefold()
        start = text.find(needle)
        while start != -1:
            seen.add(negated_at(text, start))
            start = text.find(needle, start + 1)
    return seen


def raw_copy(content: str, message: str) -> bool:
    """True when `content` is (nearly all of) the user's message, copied."""
    stored, said = folded(content), folded(message)
    if not stored or stored not in said:
        return False
    return len(stored) >= RAW_SHARE * len(said) or len(stored) >= RAW_LENGTH


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
    background: bool = False  # an unrelated row of the realistic comparison set


@dataclass(frozen=True)
class Effect:
    """One change a good extraction makes."""

    action: str
    scopes: tuple[str, ...] = ()  # insert: where the row may go
    ref: str | None = None  # touch / update: the seeded row
    must: Match = ()  # insert / update: what the stored words must say
    must_not: tuple[str, ...] = ()  # … and must not
    polarity: str = "+"
    or_insert: bool = False  # update: a new row of the same scope that says it is as good

    def describe(self) -> str:
        """The effect in words, for a judge model and for reading a report."""
        parts = [" and ".join("/".join(group) for group in self.must)]
        if self.polarity == "-":
            parts.append("(said as something the user does NOT want)")
        if self.must_not:
            parts.append("without: " + "; ".join(self.must_not))
        return " ".join(p for p in parts if p)


# Why stored words do not say an effect (`verdict`); None when they do.
MISSING, MUST_NOT, ONE_OFF_DETAIL, INVERTED, RAW_MESSAGE = (
    "missing", "must_not", "one_off", "inverted", "raw_message")


def verdict(content: str, effect: Effect, user_message: str) -> str | None:
    """None when `content` says `effect`; else the first reason it does not."""
    if raw_copy(content, user_message):
        return RAW_MESSAGE
    if effect.must and not says(content, effect.must):
        return MISSING
    flat = folded(content)
    if any(folded(phrase) in flat for phrase in effect.must_not):
        return MUST_NOT
    if any(folded(marker) in flat for marker in ONE_OFF):
        return ONE_OFF_DETAIL
    if effect.must and effect.polarity != "any":
        negated = True in polarity_of(content, effect.must[0])
        if negated != (effect.polarity == "-"):
            return INVERTED
    return None


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
    forbidden: tuple[str, ...] = ()
    background: int = 0
    why: str = ""
    refs: dict[str, Memory] = field(default_factory=dict, compare=False, repr=False)

    @property
    def decision(self) -> str:
        """The expected decision in one word: `nothing`, or the actions joined by `+`."""
        return "+".join(sorted({e.action for e in self.expect})) or "nothing"

    @property
    def project_valid(self) -> bool:
        return valid_project_key(self.project_key, BOT_PROJECT_KEYS) is not None

    @property
    def headline(self) -> bool:
        """Put to the model: a case under the D11 threshold never is, so it is no score."""
        return self.kind != "short"


def _match(raw: Any, where: str) -> Match:
    if raw is None:
        return ()
    if not (isinstance(raw, list) and raw and all(
            isinstance(g, list) and g and all(isinstance(a, str) and a.strip() for a in g)
            for g in raw)):
        raise CaseError(f"{where}: must/match must be a non-empty list of non-empty string "
                        "lists")
    return tuple(tuple(group) for group in raw)


def _phrases(raw: Any, where: str, name: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not (isinstance(raw, list) and all(isinstance(p, str) and p.strip() for p in raw)):
        raise CaseError(f"{where}: {name} must be a list of non-empty strings")
    return tuple(raw)


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
    polarity = raw.get("polarity", "+")
    if polarity not in POLARITIES:
        raise CaseError(f"{where}: polarity is one of {POLARITIES}")
    must = _match(raw.get("must"), where)
    must_not = _phrases(raw.get("must_not"), where, "must_not")
    if action == "insert":
        scopes = raw.get("scope")
        scopes = tuple(scopes) if isinstance(scopes, list) else (scopes,)
        if not scopes or any(s not in SCOPES for s in scopes):
            raise CaseError(f"{where}: an insert needs a scope")
        if not must:
            raise CaseError(f"{where}: an insert needs a must")
        return Effect(action, scopes=scopes, must=must, must_not=must_not, polarity=polarity)
    if not raw.get("ref"):
        raise CaseError(f"{where}: a {action} needs a ref")
    or_insert = raw.get("or_insert", False) is True
    if or_insert and action != "update":
        raise CaseError(f"{where}: or_insert goes with an update")
    return Effect(action, ref=raw["ref"], must=must, must_not=must_not, polarity=polarity,
                  or_insert=or_insert)


def _check(case: Case) -> None:
    where = case.id
    if case.kind not in KINDS or case.lang not in ("zh", "en"):
        raise CaseError(f"{where}: unknown kind or lang")
    short = length(normalize(case.user)) < EXTRACT_MIN_USER_MESSAGE
    if short != (case.kind == "short"):
        raise CaseError(f"{where}: kind 'short' is exactly the messages under the D11 threshold")
    if not 0 <= case.background <= BACKGROUND_MAX:
        raise CaseError(f"{where}: background is 0 to {BACKGROUND_MAX} rows")
    for effect in case.expect + case.optional:
        if effect.must and effect.polarity == "+" and any(
                _NEGATION.search(alt) for alt in effect.must[0]):
            raise CaseError(f"{where}: a negated word in the first must group needs polarity "
                            "'-' or 'any'")
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


def _case_text(raw: dict[str, Any]) -> str:
    """Everything a case says, folded: no background row may share a topic with it."""
    parts = [raw.get("user", ""), raw.get("assistant", "")]
    for memory in raw.get("memories") or []:
        parts += [memory.get("content", "")] + [alt for group in memory.get("match") or []
                                                for alt in group]
    for effect in (raw.get("expect") or []) + (raw.get("optional") or []):
        parts += [alt for group in effect.get("must") or [] for alt in group]
        parts += effect.get("must_not") or []
    return folded(" ".join(str(p) for p in parts))


def _background(raw: dict[str, Any], count: Any, where: str) -> tuple[Memory, ...]:
    if not isinstance(count, int) or isinstance(count, bool):
        raise CaseError(f"{where}: background is a number of rows")
    project = valid_project_key(raw.get("project"), BOT_PROJECT_KEYS)
    return tuple(Memory(f"bg{i}", scope, key, "AUTO", "ACTIVE", content, background=True)
                 for i, (scope, key, content) in enumerate(
                     background.rows(str(raw.get("id")), _case_text(raw), project, count), 1))


def parse_case(raw: dict[str, Any]) -> Case:
    """One case from its JSON object, checked (CaseError when it cannot be scored)."""
    where = str(raw.get("id"))
    try:
        project_key = raw.get("project")
        own = tuple(_memory(m, project_key, f"{where} memory {i}")
                    for i, m in enumerate(raw.get("memories") or []))
        count = raw.get("background", 0)
        memories = _background(raw, count, where) + own
        refs = {m.ref: m for m in memories}
        if len(refs) != len(memories):
            raise CaseError(f"{where}: refs must be unique")
        case = Case(id=raw["id"], kind=raw["kind"], lang=raw["lang"], project_key=project_key,
                    memories=memories, user=raw["user"], assistant=raw["assistant"],
                    expect=tuple(_effect(e, where) for e in raw.get("expect") or []),
                    optional=tuple(_effect(e, where) for e in raw.get("optional") or []),
                    forbidden=_phrases(raw.get("forbidden"), where, "forbidden"),
                    background=count, why=raw.get("why", ""), refs=refs)
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
