"""The auditor's reads (seed §5.4): read-only, and each one recorded first, so the user whose
memories were read sees it in their access log (SPEC §8 Audit transparency)."""

from __future__ import annotations

from app.errors import MemoryNotFound
from app.memory import access_log, journal, repository
from app.memory.access_log import Read
from app.memory.models import MemoryItem
from app.memory.provenance import Provenance, tell
from app.memory.repository import Filters
from app.paging import Page, PageRequest


def memories(viewer_id: int, user_id: int, filters: Filters,
             request: PageRequest) -> Page[MemoryItem]:
    """A page of `user_id`'s memories, for `viewer_id`."""
    access_log.record(viewer_id, user_id, Read.LIST)
    return repository.page(user_id, filters, request)


def _owned_history(viewer_id: int, item_id: int) -> tuple[int, list[journal.Entry]]:
    owner = repository.owner_of(item_id)
    if owner is None:
        raise MemoryNotFound()
    access_log.record(viewer_id, owner, Read.HISTORY, item_id)
    return owner, journal.history(owner, item_id) or []


def history(viewer_id: int, item_id: int) -> list[journal.Entry]:
    """Any user's memory's changes, oldest first, for `viewer_id`."""
    return _owned_history(viewer_id, item_id)[1]


def provenance(viewer_id: int, item_id: int) -> tuple[MemoryItem, Provenance]:
    """The memory and its history grouped for the audit page's 来源与历史."""
    owner, entries = _owned_history(viewer_id, item_id)
    item = repository.owned(owner, item_id)
    if item is None:  # deleted between the two reads
        raise MemoryNotFound()
    return item, tell(owner, entries)
