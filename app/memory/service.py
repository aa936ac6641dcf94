"""The memory service: every read and write of a user's memories goes through here.

It validates with `rules`, owns the transaction (commit on success, rollback on any error) and
raises `ApiError` with the SPEC §4 code, so the JSON API and the pages behave identically.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from flask import current_app
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from app.auth.models import User
from app.db_types import utcnow
from app.errors import (
    DuplicateContent,
    InvalidContent,
    InvalidInput,
    LimitReached,
    MemoryNotFound,
)
from app.extensions import db
from app.memory import rules
from app.memory.models import MemoryItem, UserMemoryPreference
from app.memory.rules import Scope, Source, Status
from app.sessions.models import PlatformSession

MAX_PAGE_SIZE = 100
MAX_ID = 2**63 - 1

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Page:
    records: Sequence[MemoryItem]
    total: int
    current: int
    size: int

    def to_dict(self) -> dict[str, Any]:
        return {"records": [r.to_dict() for r in self.records], "total": self.total,
                "current": self.current, "size": self.size}

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))


def bot_project_keys() -> tuple[str, ...]:
    return current_app.config.get("MEMORY_BOT_PROJECT_KEYS", rules.DEFAULT_BOT_PROJECT_KEYS)


# ---- parsing shared by every caller ------------------------------------------------------

def parse_scope(value: Any, *, required: bool = True) -> Scope | None:
    if value is None and not required:
        return None
    try:
        return Scope(value)
    except ValueError:
        raise InvalidInput("scope_invalid", "scope must be USER or PROJECT") from None


def parse_status(value: Any, *, required: bool = True) -> Status | None:
    if value is None and not required:
        return None
    try:
        return Status(value)
    except ValueError:
        raise InvalidInput("status_invalid", "status must be ACTIVE or DISMISSED") from None


def parse_paging(page: Any, size: Any) -> tuple[int, int]:
    """page ≥ 1 and 1 ≤ pageSize ≤ 100; strings from a query are accepted when all digits."""
    def as_int(value: Any, name: str, reason: str, default: int) -> int:
        if value is None or value == "":
            return default
        if isinstance(value, bool):
            raise InvalidInput(f"{reason}_invalid", f"{name} must be an integer")
        if isinstance(value, str) and value.isascii() and value.isdigit():
            value = int(value)
        if not isinstance(value, int):
            raise InvalidInput(f"{reason}_invalid", f"{name} must be an integer")
        return value

    page_n = as_int(page, "page", "page", 1)
    size_n = as_int(size, "pageSize", "page_size", 20)
    if page_n < 1 or page_n > 1_000_000:
        raise InvalidInput("page_invalid", "page must be between 1 and 1000000")
    if not 1 <= size_n <= MAX_PAGE_SIZE:
        raise InvalidInput("page_size_invalid",
                           f"pageSize must be between 1 and {MAX_PAGE_SIZE}")
    return page_n, size_n


def _manual_content(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidContent("content_type", "content must be a non-empty string")
    content = value.strip()
    if not rules.normalize(content):
        raise InvalidContent("content_empty", "content must not be empty")
    if rules.length(content) > rules.MANUAL_CONTENT_MAX:
        raise InvalidContent("content_too_long",
                             f"content must be at most {rules.MANUAL_CONTENT_MAX} characters")
    return content


def _project_key_for(scope: Scope, value: Any) -> str:
    """'' for USER; for PROJECT a real project key (not empty, not a bot key, ≤ 128)."""
    if scope is Scope.USER:
        return ""
    if value is not None and not isinstance(value, str):
        raise InvalidInput("project_key_type", "projectKey must be a string")
    key = (value or "").strip()
    if not key:
        raise InvalidInput("project_key_required", "projectKey is required for PROJECT memories")
    if rules.length(key) > rules.PROJECT_KEY_MAX:
        raise InvalidInput("project_key_too_long",
                           f"projectKey must be at most {rules.PROJECT_KEY_MAX} characters")
    if rules.is_bot_project_key(key, bot_project_keys()):
        raise InvalidInput("project_key_bot",
                           "projectKey belongs to a bot channel, not a project")
    return key


# ---- transactions -----------------------------------------------------------------------

def _not_found() -> MemoryNotFound:
    return MemoryNotFound()


def _commit_or_duplicate() -> None:
    """Commit; a race on uk_memory_dedup becomes a clean 3035, and a row a job deleted
    meanwhile (SQLite has no row lock to hold it) a 3033 — never a 500."""
    try:
        db.session.commit()
    except StaleDataError:
        db.session.rollback()
        raise _not_found() from None
    except IntegrityError:
        db.session.rollback()
        raise DuplicateContent() from None


def _ensure_room(user_id: int) -> None:
    if MemoryItem.count_active(user_id) >= rules.ACTIVE_PER_USER_MAX:
        raise LimitReached(
            "active_limit",
            f"at most {rules.ACTIVE_PER_USER_MAX} active memories; delete or dismiss some first",
        )


def _ensure_no_clash(user_id: int, dedup_hash: str, item_id: int | None = None) -> None:
    clash = MemoryItem.by_hash(user_id, dedup_hash)
    if clash is not None and clash.id != item_id:
        raise DuplicateContent()


def _rollback_on_error(fn: Callable[P, R]) -> Callable[P, R]:
    """Any error leaves the database exactly as it was."""
    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except BaseException:
            db.session.rollback()
            raise
    return wrapper


# ---- user operations --------------------------------------------------------------------

def list_items(user_id: int, *, scope: Any = None, project_key: Any = None, status: Any = None,
               page: Any = None, size: Any = None) -> Page:
    """A page of the user's memories, `updated_at DESC, id DESC`."""
    scope_v = parse_scope(scope or None, required=False)
    status_v = parse_status(status or None, required=False)
    if project_key is not None and not isinstance(project_key, str):
        raise InvalidInput("project_key_type", "projectKey must be a string")
    key = project_key.strip() if project_key else None
    page_n, size_n = parse_paging(page, size)
    rows, total = MemoryItem.page(user_id, scope=scope_v, project_key=key, status=status_v,
                                  page=page_n, size=size_n)
    return Page(rows, total, page_n, size_n)


def get_item(user_id: int, item_id: int, *, for_update: bool = False) -> MemoryItem:
    item = (MemoryItem.owned(user_id, item_id, for_update=for_update)
            if 0 < item_id <= MAX_ID else None)
    if item is None:
        raise _not_found()
    return item


@_rollback_on_error
def create_item(user_id: int, scope: Any, content: Any, project_key: Any = None) -> MemoryItem:
    """A MANUAL memory (seed §5.3): validated, deduplicated, within the 200 ACTIVE cap."""
    scope_v = parse_scope(scope)
    key = _project_key_for(scope_v, project_key)
    text = _manual_content(content)
    digest = rules.dedup_hash(scope_v, key, text)
    User.lock(user_id)
    _ensure_no_clash(user_id, digest)
    _ensure_room(user_id)
    now = utcnow()
    item = MemoryItem(user_id=user_id, scope=scope_v.value, project_key=key, content=text,
                      source=Source.MANUAL.value, status=Status.ACTIVE.value, dedup_hash=digest,
                      created_at=now, updated_at=now)
    db.session.add(item)
    _commit_or_duplicate()
    return item


@_rollback_on_error
def update_item(user_id: int, item_id: int, *, content: Any = None,
                status: Any = None) -> MemoryItem:
    """Edit content (re-hash, status kept: D12) and/or change status (ACTIVE ↔ DISMISSED)."""
    if content is None and status is None:
        raise InvalidInput("nothing_to_change", "give content, status or both")
    text = _manual_content(content) if content is not None else None
    status_v = parse_status(status) if status is not None else None
    restoring = status_v is Status.ACTIVE
    if restoring:
        User.lock(user_id)
    item = get_item(user_id, item_id, for_update=True)
    if text is not None:
        digest = rules.dedup_hash(item.scope, item.project_key, text)
        _ensure_no_clash(user_id, digest, item.id)
        item.content, item.dedup_hash = text, digest
    if status_v is not None and status_v != item.status:
        if restoring:
            _ensure_room(user_id)
        item.status = status_v.value
    item.updated_at = utcnow()
    _commit_or_duplicate()
    return item


@_rollback_on_error
def delete_item(user_id: int, item_id: int) -> None:
    """Physical delete (D3): the same fact may be learnt again later."""
    if not (0 < item_id <= MAX_ID and MemoryItem.delete_owned(user_id, item_id)):
        raise _not_found()
    db.session.commit()


def auto_capture_enabled(user_id: int) -> bool:
    return UserMemoryPreference.auto_capture_enabled_for(user_id)


@_rollback_on_error
def set_auto_capture(user_id: int, enabled: Any) -> bool:
    if not isinstance(enabled, bool):
        raise InvalidInput("auto_capture_type", "autoCaptureEnabled must be a boolean")
    pref = db.session.get(UserMemoryPreference, user_id)
    now = utcnow()
    if pref is None:
        db.session.add(UserMemoryPreference(user_id=user_id, auto_capture_enabled=enabled,
                                            created_at=now, updated_at=now))
    else:
        pref.auto_capture_enabled, pref.updated_at = enabled, now
    try:
        db.session.commit()
    except IntegrityError:
        # Two first-time toggles raced on the primary key: apply ours over theirs.
        db.session.rollback()
        pref = db.session.get(UserMemoryPreference, user_id)
        pref.auto_capture_enabled, pref.updated_at = enabled, now
        db.session.commit()
    return enabled


def project_keys(user_id: int) -> list[str]:
    """Projects the user has worked in, for the PROJECT memory picker (bot keys excluded)."""
    return PlatformSession.project_keys(user_id, bot_project_keys())


# ---- injection (seed §5.2) --------------------------------------------------------------

def context_for(user_id: int, project_key: str | None) -> dict[str, Any]:
    """The memories to inject into a new session's system prompt, and the exact block."""
    key = rules.valid_project_key(project_key, bot_project_keys())
    rows = MemoryItem.injection_rows(user_id, key)
    memories = [
        {"scope": scope, "projectKey": pk if scope == Scope.PROJECT else None, "content": content}
        for scope, pk, content in rows
    ]
    lines = [rules.prompt_line(m["scope"], m["projectKey"], m["content"]) for m in memories]
    return {"memories": memories, "prompt": rules.prompt_block(lines)}


def project_choices(user_id: int) -> list[str]:
    """The projects the pages offer for a new PROJECT memory, sorted: those the user already has
    memories under and those the platform reported sessions in (bot keys left out). The JSON
    projects endpoint stays `project_keys`, the reported ones only (SPEC §4)."""
    bots = bot_project_keys()
    own = {key for key in MemoryItem.project_keys_in_use(user_id)
           if rules.valid_project_key(key, bots) == key}
    return sorted(own | set(project_keys(user_id)))
