"""Rows stored before credentials were refused (SPEC §11): `flask --app wsgi memories
find-secrets` lists every memory the rules would refuse today — id, user, kind — and changes
nothing.

Every row is read once, ACTIVE and DISMISSED alike (a dismissed row is still shown to the model
as the negative set). The rows come through one streamed query (a server-side cursor on MySQL,
`yield_per` batches), so memory stays flat however many rows there are; the read engine runs in
AUTOCOMMIT, so the scan holds no transaction and takes no lock. Its SQL lives here rather than
in the repository: it reads across every user, no one user's memories.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import sqlalchemy as sa

from app.database import hot_engines
from app.memory import rules
from app.memory.models import MemoryItem
from app.memory.secrets import Kind

BATCH = 10_000
ROWS = sa.select(MemoryItem.id, MemoryItem.user_id, MemoryItem.content).order_by(MemoryItem.id)


@dataclass(frozen=True)
class Found:
    """A stored memory that holds a credential."""

    id: int
    user_id: int
    kind: Kind


@dataclass
class Scan:
    """What one scan read, and how long it took."""

    rows: int = 0
    found: int = 0
    started: float = field(default_factory=time.perf_counter)

    @property
    def seconds(self) -> float:
        return time.perf_counter() - self.started


def find(scan: Scan, batch: int = BATCH) -> Iterator[Found]:
    """Each stored memory holding a credential, in id order; `scan` counts as it goes."""
    options = {"stream_results": True, "yield_per": batch}
    with hot_engines().reads.connect().execution_options(**options) as connection:
        for rows in connection.execute(ROWS).partitions():
            scan.rows += len(rows)
            for item_id, user_id, content in rows:
                kind = rules.credential(content)
                if kind is not None:
                    scan.found += 1
                    yield Found(item_id, user_id, kind)
