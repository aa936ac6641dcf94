"""The memory domain's rules, in one place (seed §5.1, D5, D7, D11, D14, D15).

Every path that writes or reads memories — JSON API, pages, extraction and consolidation jobs,
the context endpoint — uses these functions and constants, so the rules cannot drift apart.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from enum import StrEnum


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
PROJECT_KEY_MAX = 128
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

DEFAULT_BOT_PROJECT_KEYS: tuple[str, ...] = ("weixin-bot",)
_FEISHU_CHAT_KEY = re.compile(r"^feishu-chat-\d+-")
_WHITESPACE_RUN = re.compile(r"\s+")

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


def is_bot_project_key(key: str, bot_keys: Iterable[str] = DEFAULT_BOT_PROJECT_KEYS) -> bool:
    """Bot channels (WeChat, Feishu chats) report a project key that is not a project."""
    return key in tuple(bot_keys) or bool(_FEISHU_CHAT_KEY.match(key))


def valid_project_key(
    key: str | None, bot_keys: Iterable[str] = DEFAULT_BOT_PROJECT_KEYS
) -> str | None:
    """The key itself when it names a real project, else None (empty, bot key, too long)."""
    if not isinstance(key, str):
        return None
    key = key.strip()
    if not key or length(key) > PROJECT_KEY_MAX or is_bot_project_key(key, bot_keys):
        return None
    return key


def consolidation_target(scope: Scope | str) -> int:
    """D15 group target: USER ≤ 30, each project group ≤ 60."""
    return CONSOLIDATE_USER_TARGET if Scope(scope) is Scope.USER else CONSOLIDATE_PROJECT_TARGET


def group_label(scope: Scope | str, project_key: str | None) -> str:
    """How a memory's group is named to a model: `[用户]`, or `[项目:<key>]`."""
    return "[用户]" if Scope(scope) is Scope.USER else f"[项目:{project_key}]"


def prompt_line(scope: Scope | str, project_key: str | None, content: str) -> str:
    """One line of the injected block; content folded so a memory is always one line."""
    return f"- {group_label(scope, project_key)} {normalize(content)}"


def prompt_block(lines: list[str]) -> str:
    """The exact `## 长期记忆` block of SPEC §4, or "" when there is nothing to inject."""
    if not lines:
        return ""
    return "\n".join([PROMPT_HEADER, *lines])
