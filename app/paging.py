"""Paging, the same way everywhere: `page` ≥ 1, 1 ≤ `pageSize` ≤ 100, `{records, total, current,
size}` (SPEC §4). Memories, outcomes, access logs and the pages' lists all page through here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import sqlalchemy as sa

from app.errors import InvalidInput
from app.extensions import db

T = TypeVar("T")

DEFAULT_SIZE = 20
MAX_SIZE = 100
MAX_PAGE = 1_000_000


def _as_int(value: Any, name: str, reason: str, default: int) -> int:
    """An integer, or its all-digit string (query strings); absent or '' gives `default`."""
    if value is None or value == "":
        return default
    if isinstance(value, str) and value.isascii() and value.isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(reason, f"{name} must be an integer")
    return value


@dataclass(frozen=True)
class PageRequest:
    number: int = 1
    size: int = DEFAULT_SIZE

    @classmethod
    def parse(cls, page: Any, size: Any, default_size: int = DEFAULT_SIZE) -> PageRequest:
        number = _as_int(page, "page", "page_invalid", 1)
        per_page = _as_int(size, "pageSize", "page_size_invalid", default_size)
        if not 1 <= number <= MAX_PAGE:
            raise InvalidInput("page_invalid", f"page must be between 1 and {MAX_PAGE}")
        if not 1 <= per_page <= MAX_SIZE:
            raise InvalidInput("page_size_invalid", f"pageSize must be between 1 and {MAX_SIZE}")
        return cls(number, per_page)

    @property
    def offset(self) -> int:
        return (self.number - 1) * self.size


@dataclass(frozen=True)
class Page(Generic[T]):
    records: Sequence[T]
    total: int
    current: int
    size: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // self.size))

    def to_dict(self, record: Callable[[T], Any]) -> dict[str, Any]:
        return {"records": [record(r) for r in self.records], "total": self.total,
                "current": self.current, "size": self.size}


def paginate(statement: sa.Select, request: PageRequest, *,
             scalars: bool = True) -> Page[Any]:
    """One page of `statement` (which carries its own ORDER BY) and the count of all it
    matches. `scalars=False` keeps whole rows (several columns) instead of the first one."""
    total = db.session.scalar(
        statement.with_only_columns(sa.func.count(), maintain_column_froms=True)
        .order_by(None)) or 0
    paged = statement.offset(request.offset).limit(request.size)
    result = db.session.execute(paged)
    records = result.scalars().all() if scalars else result.all()
    return Page(records, total, request.number, request.size)
