"""The memory domain's rules, in one place (seed §5.1, D5, D7, D11, D14, D15).

Every path that writes or reads memories — JSON API, pages, extraction and consolidation jobs,
the context endpoint — uses these functions and constants, so the rules cannot drift apart.
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.errors import InvalidContent, InvalidInput, SecretContent

# Shared with accounts and platform sessions, which sit below the domain (`app.keys`); part of the
# domain's rules all the same (re-exported: `X as X`).
from app.keys import DEFAULT_BOT_PROJECT_KEYS as DEFAULT_BOT_PROJECT_KEYS
from app.keys import ID_MAX as ID_MAX
from app.keys import PROJECT_KEY_MAX as PROJECT_KEY_MAX
from app.keys import is_bot_project_key as is_bot_project_key
from app.keys import valid_project_key as valid_project_key
from app.memory import secrets


class Scope(StrEnum):
    USER = "USER"
    PROJECT = "PROJECT"


class Status(StrEnum):
    ACTIVE = "ACTIVE"
    DISMISSED = "DISMISSED"


class Source(StrEnum):
    AUTO = "AUTO"
    MANUAL = "MANUAL"
    CONSOLIDATED = "CONSOLIDATED"


# Rows a model produced; the only rows extraction may touch/update and consolidation may merge.
MACHINE_SOURCES: tuple[Source, ...] = (Source.AUTO, Source.CONSOLIDATED)

# D7 limits, counted in Unicode code points.
MANUAL_CONTENT_MAX = 500
EXTRACTED_CONTENT_MAX = 120
ACTIVE_PER_USER_MAX = 200
INJECT_USER_MAX = 8
INJECT_PROJECT_MAX = 12

# D11: a last user message shorter than this (after normalization) is not worth an LLM call.
EXTRACT_MIN_USER_MESSAGE = 20
# D8: each side of the conversation is cut to this many code points before prompting.
EXTRACT_INPUT_MAX = 6000
# Seed §5.6: at most this many candidates per run; more is an invalid answer as a whole.
EXTRACT_MAX_ITEMS = 3
# D13: how many DISMISSED contents are shown to the model as the negative set.
NEGATIVE_SET_MAX = 50

# D15 consolidation thresholds.
CONSOLIDATE_ACTIVE_THRESHOLD = 150
CONSOLIDATE_USER_TARGET = 30
CONSOLIDATE_PROJECT_TARGET = 60
CONSOLIDATE_COOLDOWN_HOURS = 24
# A merge joins at least this many rows; a group with fewer machine rows has nothing to merge.
MERGE_MIN_SOURCES = 2

_WHITESPACE_RUN = re.compile(r"\s+")
# What a prompt line must never carry (SPEC §8 Input): C0 and C1 controls, the Unicode line and
# paragraph separators, and surrogates (in a str every one is lone: a valid pair decodes to one
# character). A newline in a key or a memory would start a line of its own in the injected block.
_CONTROLS = "\x00-\x1f\x7f-\x9f\u2028\u2029"
_SURROGATES = "\ud800-\udfff"
# Bidirectional embeddings, overrides and isolates (SPEC §9) count as control characters:
# `ma\u202eo` shows as another text than it is, on the pages and in the prompt.
_BIDI = "\u202a-\u202e\u2066-\u2069"
# Unicode's default-ignorable code points (SPEC §11 "Project keys"): soft hyphen, zero-width
# characters, LRM/RLM, Hangul fillers, variation selectors, tag characters, … render as nothing,
# so two keys that look alike differ (`mao`, `ma\u00ado`). Refused in project keys only
# (content keeps them: the zero-width joiner builds emoji, variation selectors pick glyphs).
_IGNORABLE = ("\u00ad\u034f\u115f-\u1160\u17b4-\u17b5\u180b-\u180f\u200b-\u200f"
              "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0")
# The ones beyond the BMP: a JSON Schema pattern (ECMA-262 without the u flag reads UTF-16 code
# units) cannot name them in a character class, so the document's pattern leaves them out.
_IGNORABLE_ASTRAL = "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
_REFUSED_IN_KEY = f"{_CONTROLS}{_BIDI}{_IGNORABLE}"
_UNSAFE_IN_KEY = re.compile(f"[{_REFUSED_IN_KEY}{_IGNORABLE_ASTRAL}{_SURROGATES}]")
# Content may keep tab, CR and LF (a textarea sends CRLF); normalize() folds them for prompts.
_REFUSED_IN_CONTENT = f"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u2028\u2029{_BIDI}"
_UNSAFE_IN_CONTENT = re.compile(f"[{_REFUSED_IN_CONTENT}{_SURROGATES}]")
# What one_line turns into a space: rows stored before these rules cannot break or spoof a line.
_UNSAFE_IN_LINE = re.compile(f"[{_CONTROLS}{_BIDI}{_SURROGATES}]")


def _schema_pattern(refused: str, *, not_blank: bool) -> str:
    """A JSON Schema pattern (ECMA-262, read the same way by Python's re) for text holding none
    of the `refused` characters and, with `not_blank`, something besides whitespace. Each
    character is spelled as its \\uXXXX escape. Lone surrogates are left out: no JSON text
    decodes to one that a schema validator could see (the API refuses them all the same)."""
    chars = "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in refused)
    if not not_blank:
        return f"^[^{chars}]*$"
    return f"^[^{chars}]*[^\\s{chars}][^{chars}]*$"


# The same rules, for /api/openapi.json (`app.schemas`), so the document refuses exactly what
# these functions refuse: any project key sent, a key that names a project, a memory's content.
PROJECT_KEY_PATTERN = _schema_pattern(_REFUSED_IN_KEY, not_blank=False)
PROJECT_PATTERN = _schema_pattern(_REFUSED_IN_KEY, not_blank=True)
CONTENT_PATTERN = _schema_pattern(_REFUSED_IN_CONTENT, not_blank=True)

PROMPT_HEADER = (
    "## 长期记忆\n"
    "以下是关于这位用户与当前项目的已确认记忆;与用户当前消息或工作区规则冲突时,以用户当前消息为准:"
)


def normalize(content: str) -> str:
    """Fold every whitespace run (newlines too) to one space, then trim."""
    return _WHITESPACE_RUN.sub(" ", content).strip()


def length(text: str) -> int:
    """Length in Unicode code points (what every limit counts)."""
    return len(text)


def dedup_hash(scope: Scope | str, project_key: str | None, content: str) -> str:
    """SHA-1 hex of "{scope}|{projectKey or ''}|{normalized content}"."""
    raw = f"{Scope(scope).value}|{project_key or ''}|{normalize(content)}"
    return hashlib.sha1(raw.encode("utf-8")).hexdigest()


def manual_content(value: Any) -> str:
    """A user's memory text, trimmed: not empty, at most MANUAL_CONTENT_MAX code points, no
    control character other than tab, CR and LF (bidirectional controls included), and no
    credential (SecretContent, SPEC §11)."""
    if not isinstance(value, str):
        raise InvalidContent("content_type", "content must be a non-empty string")
    if _UNSAFE_IN_CONTENT.search(value):
        raise InvalidContent("content_control_chars",
                             "content must not contain control characters or lone surrogates")
    content = value.strip()
    if not normalize(content):
        raise InvalidContent("content_empty", "content must not be empty")
    if length(content) > MANUAL_CONTENT_MAX:
        raise InvalidContent("content_too_long",
                             f"content must be at most {MANUAL_CONTENT_MAX} characters")
    refuse_credential(content)
    return content


def credential(content: str) -> secrets.Kind | None:
    """The kind of credential `content` holds, or None (SPEC §11: credentials are never
    stored). Every path that writes content asks: by hand, extraction, consolidation."""
    return secrets.find(content)


def refuse_credential(content: str) -> None:
    """SecretContent, naming the kind, when `content` holds a credential."""
    kind = credential(content)
    if kind is not None:
        raise SecretContent(f"content_secret_{kind.value}",
                            f"{kind.suspected}: content holds {kind.english}; credentials are "
                            "never stored as memories")


def reported_project_key(value: str) -> str:
    """Any project key a caller sends (API, webhook, preview, context, list filter): refused
    when it holds a control character (bidirectional ones included), a default-ignorable code
    point (zero-width, soft hyphen, variation selector, tag, …) or a lone surrogate; the key
    itself otherwise."""
    if _UNSAFE_IN_KEY.search(value):
        raise InvalidInput("project_key_control_chars",
                           "projectKey must not contain control, bidirectional or invisible "
                           "(default-ignorable) characters or lone surrogates")
    return value


def project_key(value: Any, bot_keys: Iterable[str] = DEFAULT_BOT_PROJECT_KEYS) -> str:
    """The key of a PROJECT memory: a real project (not empty, not a bot key, ≤ 128)."""
    if value is not None and not isinstance(value, str):
        raise InvalidInput("project_key_type", "projectKey must be a string")
    key = reported_project_key(value or "").strip()
    if not key:
        raise InvalidInput("project_key_required", "projectKey is required for PROJECT memories")
    if length(key) > PROJECT_KEY_MAX:
        raise InvalidInput("project_key_too_long",
                           f"projectKey must be at most {PROJECT_KEY_MAX} characters")
    if is_bot_project_key(key, bot_keys):
        raise InvalidInput("project_key_bot", "projectKey belongs to a bot channel, not a project")
    return key


@dataclass(frozen=True)
class Group:
    """One group of a user's memories: the USER group, or the group of one project.

    Extraction matches within a group (D13), D14 demotes within it and D15 consolidates it; the
    label names it to a model and in the injected block.
    """

    project_key: str | None = None  # None: the USER group

    @classmethod
    def of(cls, scope: Scope | str, project_key: str | None) -> Group:
        """The group of a row or a request (a USER row's stored key is '')."""
        return cls(None) if Scope(scope) is Scope.USER else cls(project_key)

    @property
    def scope(self) -> Scope:
        return Scope.USER if self.project_key is None else Scope.PROJECT

    @property
    def key(self) -> str:
        """The project key as stored: '' for the USER group."""
        return self.project_key or ""

    @property
    def label(self) -> str:
        """`[用户]`, or `[项目:<key>]`."""
        return "[用户]" if self.project_key is None else f"[项目:{self.project_key}]"

    @property
    def consolidation_target(self) -> int:
        """D15 group target: USER ≤ 30, each project group ≤ 60."""
        return CONSOLIDATE_USER_TARGET if self.project_key is None else CONSOLIDATE_PROJECT_TARGET

    def dedup_hash(self, content: str) -> str:
        return dedup_hash(self.scope, self.project_key, content)


USER_GROUP = Group()


def one_line(text: str) -> str:
    """`text` folded to one line whatever it holds: whitespace runs to a space, every other
    control character, line separator or surrogate to a space too."""
    # Nearly every row is one clean line already, and the block renders twenty on each context
    # cache miss, where the two regexes were a fifth of the miss's CPU. A printable str holds
    # no control character, separator or surrogate and no whitespace but the plain space, so
    # only a doubled or an outer space could change: decided at C speed, same result.
    if text.isprintable() and "  " not in text and not text.startswith(" ") \
            and not text.endswith(" "):
        return text
    return normalize(_UNSAFE_IN_LINE.sub(" ", text))


def prompt_line(scope: Scope | str, project_key: str | None, content: str) -> str:
    """One line of the injected block, always exactly one: rows stored before the input rules,
    or written by any other path, cannot start a line of their own (`## 系统指令`)."""
    return f"- {_line_label(scope, project_key)} {one_line(content)}"


@functools.lru_cache(maxsize=4096)
def _line_label(scope: Scope | str, project_key: str | None) -> str:
    """`[用户]` or `[项目:<key>]` as a line starts: a user's few groups, on every context miss
    (twenty lines each), worked out once."""
    return one_line(Group.of(scope, project_key).label)


def prompt_block(lines: list[str]) -> str:
    """The exact `## 长期记忆` block of SPEC §4, or "" when there is nothing to inject."""
    if not lines:
        return ""
    return "\n".join([PROMPT_HEADER, *lines])
