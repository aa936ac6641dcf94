"""A user's own memories, as the JSON API and the pages reach them (seed §5.3).

Each function that changes something is one web request's unit of work: it checks the input with
`rules`, lets `UserMemories` make the change and commits — so the API and the pages behave
identically, and a refusal or a failure half-way changes nothing. Reads need no transaction of
their own (the request's session ends with the request).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from typing import Any

from flask import current_app
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm.exc import StaleDataError

from app.database.conflicts import retry_conflicts
from app.db_types import utcnow
from app.errors import DuplicateContent, InvalidInput, MemoryNotFound
from app.memory import context, journal, repository, rules
from app.memory.events import Actor, SettingsChanged
from app.memory.memories import UserMemories
from app.memory.models import MemoryItem
from app.memory.provenance import Provenance, tell
from app.memory.repository import Filters
from app.memory.rules import Group, Scope, Status
from app.paging import Page, PageRequest
from app.sessions.models import PlatformSession
from app.unit_of_work import UnitOfWork


def bot_project_keys() -> tuple[str, ...]:
    keys: tuple[str, ...] = current_app.config.get("MEMORY_BOT_PROJECT_KEYS",
                                                    rules.DEFAULT_BOT_PROJECT_KEYS)
    return keys


def _commit(uow: UnitOfWork) -> None:
    """Commit; a race on uk_memory_dedup becomes a clean 3035, and a row a job deleted
    meanwhile (SQLite has no row lock to hold it) a 3033 — never a 500."""
    try:
        uow.commit()
    except StaleDataError:
        raise MemoryNotFound() from None
    except IntegrityError:
        raise DuplicateContent() from None


# ---- reads ----------------------------------------------------------------------------------

def list_items(user_id: int, filters: Filters, request: PageRequest) -> Page[MemoryItem]:
    """A page of the user's memories, `updated_at DESC, id DESC`."""
    return repository.page(user_id, filters, request)


def get_item(user_id: int, item_id: int) -> MemoryItem:
    item = repository.owned(user_id, item_id)
    if item is None:
        raise MemoryNotFound()
    return item


def history(user_id: int, item_id: int) -> list[journal.Entry]:
    """The memory's changes, oldest first (SPEC §8 Provenance)."""
    entries = journal.history(user_id, item_id)
    if entries is None:
        raise MemoryNotFound()
    return entries


def provenance(user_id: int, item_id: int) -> Provenance:
    """The memory's history grouped for 来源与历史."""
    return tell(user_id, history(user_id, item_id))


def auto_capture_enabled(user_id: int) -> bool:
    return repository.auto_capture_enabled(user_id)


def project_keys(user_id: int) -> list[str]:
    """Projects the user has worked in (reported sessions, bot keys excluded): the JSON projects
    endpoint (SPEC §4)."""
    return PlatformSession.project_keys(user_id, bot_project_keys())


def project_choices(user_id: int) -> list[str]:
    """The projects the pages offer for a new PROJECT memory, sorted: those the user already has
    memories under and those the platform reported sessions in (bot keys left out)."""
    bots = bot_project_keys()
    own = {key for key in repository.project_keys_in_use(user_id)
           if rules.valid_project_key(key, bots) == key}
    return sorted(own | set(project_keys(user_id)))


# ---- changes --------------------------------------------------------------------------------

def _group_for(scope: Scope, project_key: Any) -> Group:
    """The USER group, or for PROJECT a real project key (not empty, not a bot key, ≤ 128)."""
    if scope is Scope.USER:
        return rules.USER_GROUP
    return Group(rules.project_key(project_key, bot_project_keys()))


@retry_conflicts
def create_item(user_id: int, scope: Scope, content: Any, project_key: Any = None) -> MemoryItem:
    """A MANUAL memory."""
    group = _group_for(scope, project_key)
    text = rules.manual_content(content)
    with UnitOfWork() as uow:
        item = UserMemories(uow, user_id, Actor.USER).create(group, text)
        _commit(uow)
        return item


@retry_conflicts
def update_item(user_id: int, item_id: int, *, content: Any = None,
                status: Status | None = None,
                expected_versions: Collection[int] | None = None) -> MemoryItem:
    """Edit content (re-hash, status kept: D12) and/or change status (ACTIVE ↔ DISMISSED);
    with `expected_versions` (If-Match), only a row still at one of them (SPEC §11)."""
    if content is None and status is None:
        raise InvalidInput("nothing_to_change", "give content, status or both")
    text = rules.manual_content(content) if content is not None else None
    with UnitOfWork() as uow:
        item = UserMemories(uow, user_id, Actor.USER).edit(
            item_id, content=text, status=status, expected_versions=expected_versions)
        _commit(uow)
        return item


@retry_conflicts
def delete_item(user_id: int, item_id: int, *,
                expected_versions: Collection[int] | None = None) -> None:
    """Delete for good (D3: the same fact may be learnt again later); with
    `expected_versions` (If-Match), only a row still at one of them (SPEC §11)."""
    with UnitOfWork() as uow:
        UserMemories(uow, user_id, Actor.USER).delete(item_id,
                                                      expected_versions=expected_versions)
        uow.commit()


@retry_conflicts
def set_auto_capture(user_id: int, enabled: Any) -> bool:
    if not isinstance(enabled, bool):
        raise InvalidInput("auto_capture_type", "autoCaptureEnabled must be a boolean")
    with UnitOfWork() as uow:
        repository.set_auto_capture(user_id, enabled, utcnow())
        uow.record(SettingsChanged(user_id))
        uow.commit()
    return enabled


# ---- injection (seed §5.2) ------------------------------------------------------------------

def context_json(user_id: int, project_key: str | None) -> str:
    """The memories to inject into a new session's system prompt and the exact block, as the
    JSON text the envelope carries: the platform's context read and the user's preview."""
    return context.block_json(user_id, rules.valid_project_key(project_key, bot_project_keys()))


def active_count(user_id: int) -> int:
    """How many ACTIVE memories the user has, against the cap (`rules.ACTIVE_PER_USER_MAX`)."""
    return repository.count_active(user_id)


def beyond_injection_caps(user_id: int, items: Iterable[MemoryItem]) -> set[int]:
    """The ids among `items` that are ACTIVE yet no new session gets today: beyond the newest
    `INJECT_PROJECT_MAX` of their project or `INJECT_USER_MAX` USER rows (SPEC §9). A project a
    session cannot be in (a bot key) gets no mark: no cap is what keeps it out."""
    bots = bot_project_keys()
    active = [item for item in items if item.status == Status.ACTIVE]
    keys = {item.project_key for item in active if item.scope == Scope.PROJECT
            and rules.valid_project_key(item.project_key, bots) == item.project_key}
    if not active:
        return set()
    injected = repository.injected_ids(user_id, keys)
    return {item.id for item in active if item.id not in injected
            and (item.scope == Scope.USER or item.project_key in keys)}


def edited_machine_memories(user_id: int, items: Iterable[MemoryItem]) -> set[int]:
    """The ids among `items` that were made by the agent and since edited by the user (shown
    as 自动 · 已编辑): the words are the user's now, not what was learnt."""
    machine = [item.id for item in items if item.source != rules.Source.MANUAL]
    return journal.edited_by_user(user_id, machine) if machine else set()


def left_out_of_context(user_id: int, project_key: str | None) -> int:
    """How many ACTIVE memories a new session (in `project_key`, a valid key or None) would
    not get because of the injection caps: the preview says so beside what it gets."""
    user = sum(repository.group_counts(user_id, rules.USER_GROUP))
    left = max(0, user - rules.INJECT_USER_MAX)
    if project_key is not None:
        project = sum(repository.group_counts(user_id, Group(project_key)))
        left += max(0, project - rules.INJECT_PROJECT_MAX)
    return left


def items_among(user_id: int, item_ids: Collection[int]) -> list[MemoryItem]:
    """The user's memories among `item_ids`; gone and others' ones left out."""
    return repository.owned_among(user_id, item_ids)


def preview(user_id: int, project_key: str | None) -> dict[str, Any]:
    """The agent's view for the page: the context answer itself, read back from its JSON text."""
    answer: dict[str, Any] = json.loads(context_json(user_id, project_key))
    return answer
