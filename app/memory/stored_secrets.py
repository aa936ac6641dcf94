"""Rows stored before credentials were refused (SPEC §11): `flask --app wsgi memories
find-secrets` lists every memory the rules would refuse today — id, user, kind — and changes
nothing.

Every row is read once, ACTIVE and DISMISSED alike (a dismissed row is still shown to the model
as the negative set), streamed in batches (`repository.every_content`), and judged by the same
rule every write path asks (`rules.credential`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from app.memory import repository, rules
from app.memory.secrets import Kind

BATCH = 10_000


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
    for rows in repository.every_content(batch):
        scan.rows += len(rows)
        for item_id, user_id, content in rows:
            kind = rules.credential(content)
            if kind is not None:
                scan.found += 1
                yield Found(item_id, user_id, kind)
