"""Identifiers and project keys: the rules every layer shares, below the domain.

Accounts (`auth`), platform sessions (`sessions`) and the memory domain all store platform ids
and project keys; what fits and what names a real project is decided here once, so no lower
package has to import the memory domain for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Ids are BIGINT: the largest one the database can store.
ID_MAX = 2**63 - 1
PROJECT_KEY_MAX = 128
DEFAULT_BOT_PROJECT_KEYS: tuple[str, ...] = ("weixin-bot",)
_FEISHU_CHAT_KEY = re.compile(r"^feishu-chat-\d+-")


def is_bot_project_key(key: str, bot_keys: Iterable[str] = DEFAULT_BOT_PROJECT_KEYS) -> bool:
    """Bot channels (WeChat, Feishu chats) report a project key that is not a project."""
    return key in tuple(bot_keys) or bool(_FEISHU_CHAT_KEY.match(key))


def valid_project_key(
    key: str | None, bot_keys: Iterable[str] = DEFAULT_BOT_PROJECT_KEYS
) -> str | None:
    """The key itself when it names a real project, else None (empty, bot key, too long: keys
    are counted in code points)."""
    if not isinstance(key, str):
        return None
    key = key.strip()
    if not key or len(key) > PROJECT_KEY_MAX or is_bot_project_key(key, bot_keys):
        return None
    return key
