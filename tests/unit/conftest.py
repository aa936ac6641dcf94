"""The domain against in-memory fakes: no database, no Redis, no Flask app.

Nothing here asks for the top conftest's `app` or `migrated_database`, so `pytest tests/unit`
runs with MariaDB and Redis down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from app.memory.events import Actor
from app.memory.memories import UserMemories
from tests.unit.fakes import SESSION_ID, USER_ID, FakeRepository, FakeUnitOfWork


@pytest.fixture
def repo() -> FakeRepository:
    return FakeRepository()


@pytest.fixture
def uow(repo: FakeRepository) -> Iterator[FakeUnitOfWork]:
    """An open unit of work over `repo`; left without a commit, it rolls back."""
    with FakeUnitOfWork(repo) as uow:
        yield uow


@pytest.fixture
def memories(uow: FakeUnitOfWork) -> Callable[..., UserMemories]:
    """`memories(actor)`: USER_ID's memories in `uow`, changed by `actor` (extraction on
    behalf of SESSION_ID)."""

    def make(actor: Actor = Actor.USER, user_id: int = USER_ID) -> UserMemories:
        session_id = SESSION_ID if actor is Actor.EXTRACTION else None
        return UserMemories(uow, user_id, actor, session_id, repository=uow.memories)

    return make
