"""Every SQL statement on memory_item and user_memory_preference, and nowhere else.

Reads return ORM rows or small Core rows; writes are Core statements in the caller's
transaction, so the aggregate (`memories.UserMemories`) decides and the unit of work commits.
Each group read is one index range scan: the USER group on idx_memory_user, a project group on
idx_memory_project (a non-empty project_key only ever belongs to PROJECT rows); each list is
ordered `updated_at DESC, id DESC` from the index, without a filesort.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import sqlalchemy as sa

from app.auth.models import User
from app.database.batches import (
    Read,
    Row,
    Rows,
    Written,
    affected,
    batch,
    read,
    rows,
    written,
)
from app.database.conflicts import retry_conflicts
from app.database.engines import hot_engines
from app.db_types import table_of, upsert
from app.extensions import db
from app.memory.models import MemoryItem, UserMemoryPreference
from app.memory.rules import (
    ACTIVE_PER_USER_MAX,
    ID_MAX,
    INJECT_PROJECT_MAX,
    INJECT_USER_MAX,
    MACHINE_SOURCES,
    NEGATIVE_SET_MAX,
    Group,
    Scope,
    Source,
    Status,
)
from app.paging import Page, PageRequest, paginate

NEWEST_FIRST = (MemoryItem.updated_at.desc(), MemoryItem.id.desc())


def machine_made() -> sa.ColumnElement[bool]:
    """AUTO or CONSOLIDATED: the rows extraction and consolidation may match, rewrite, demote or
    merge (D13-D15). A MANUAL row is never one of them.

    Equalities rather than IN: an IN list is expanded when the statement runs, which the raw
    batches' statements, compiled once (app.database.batches), cannot do."""
    return sa.or_(*(MemoryItem.source == source.value for source in MACHINE_SOURCES))


def _in_group(user_id: int, group: Group, status: Status | None = Status.ACTIVE) -> list[Any]:
    conditions = [MemoryItem.user_id == user_id]
    if group.project_key is None:
        conditions.append(MemoryItem.scope == Scope.USER.value)
    else:
        conditions.append(MemoryItem.project_key == group.project_key)
    if status is not None:
        conditions.append(MemoryItem.status == status.value)
    return conditions


# A write, not `SELECT … FOR UPDATE`: the same row lock on one server, and on a Galera cluster
# the row goes into the write-set, so two such transactions on two nodes conflict at commit
# (1213) where a read lock would let both pass the cap (migration 0006).
LOCK_USER = (sa.update(User).where(User.id == sa.bindparam("user_id"))
             .values(memory_lock_seq=User.memory_lock_seq + 1))


def lock_user(user_id: int) -> None:
    """Serialize a user's writes that may grow their ACTIVE count (the 200 cap, D7/D14).

    A row lock on MySQL, held until the transaction ends, and a certified write on Galera;
    SQLite serializes writers on its own.
    """
    db.session.execute(LOCK_USER, {"user_id": user_id})


# ---- one memory -----------------------------------------------------------------------------

def owned(user_id: int, item_id: int, *, for_update: bool = False) -> MemoryItem | None:
    """The item when it belongs to the user; another user's item is simply absent (D4).

    `for_update` locks the row until commit, so a job deleting it meanwhile either waits for us
    or has already made it absent.
    """
    if not 0 < item_id <= ID_MAX:
        return None  # no BIGINT names it
    query = sa.select(MemoryItem).where(MemoryItem.id == item_id, MemoryItem.user_id == user_id)
    return db.session.scalar(query.with_for_update() if for_update else query)


def owner_of(item_id: int) -> int | None:
    """The user a memory belongs to (for an auditor, who reads any user's)."""
    if not 0 < item_id <= ID_MAX:
        return None
    return db.session.scalar(sa.select(MemoryItem.user_id).where(MemoryItem.id == item_id))


def add(item: MemoryItem) -> MemoryItem:
    """A new row written now (its id known); IntegrityError when the user has these words."""
    db.session.add(item)
    db.session.flush()
    return item


@dataclass(frozen=True)
class Wording:
    """The row that already says something (same dedup hash), as the guards need it."""

    id: int
    status: str
    source: str
    content: str
    updated_at: datetime


BY_HASH = (sa.select(MemoryItem.id, MemoryItem.status, MemoryItem.source, MemoryItem.content,
                     MemoryItem.updated_at)
           .where(MemoryItem.user_id == sa.bindparam("user_id"),
                  MemoryItem.dedup_hash == sa.bindparam("digest")))


def by_hash(user_id: int, digest: str, *, for_update: bool = False) -> Wording | None:
    row = db.session.execute(BY_HASH.with_for_update() if for_update else BY_HASH,
                             {"user_id": user_id, "digest": digest}).first()
    return None if row is None else Wording(*row)


COUNT_ACTIVE = (sa.select(sa.func.count()).select_from(MemoryItem)
                .where(MemoryItem.user_id == sa.bindparam("user_id"),
                       MemoryItem.status == Status.ACTIVE.value))


def count_active(user_id: int) -> int:
    return db.session.scalar(COUNT_ACTIVE, {"user_id": user_id}) or 0


class Displacement(NamedTuple):
    """What an insert into a full pool (D14) needs to know first."""

    same_words: Wording | None  # the row that already says its words: no insert, no demotion
    to_demote: int | None  # the group's stalest machine-made row; None: none left to demote


def lock_and_count(user_id: int, displacing_for: tuple[Group, str] | None = None
                   ) -> tuple[int, Displacement | None]:
    """`lock_user`, then `count_active` — exact under the lock, each statement seeing what
    others committed — in one round trip. With `displacing_for` (a group and the digest of words
    about to go into a pool expected to be full), the same round trip also brings what
    `wording_and_stalest` would find for them with nothing excluded."""
    connection = db.session.connection()
    lock = written(LOCK_USER, {"user_id": user_id})
    count = read(COUNT_ACTIVE, {"user_id": user_id}, _first_value)
    if displacing_for is None:
        _, active = batch(connection, lock, count)
        return active, None
    _, active, displacement = batch(connection, lock, count,
                                    _displacement(user_id, *displacing_for, exclude_ids=()))
    return active, displacement


def _first_value(found: Rows) -> int:
    return int(found[0][0]) if found else 0


# ---- lists ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Filters:
    """What a list of one user's memories is narrowed to; None means any."""

    scope: Scope | None = None
    project_key: str | None = None
    status: Status | None = None
    q: str | None = None  # a case-insensitive substring of the content, wildcards literal


def page(user_id: int, filters: Filters, request: PageRequest) -> Page[MemoryItem]:
    """One page of the user's memories, newest first, and how many match in all."""
    conditions = [MemoryItem.user_id == user_id]
    if filters.scope is not None:
        conditions.append(MemoryItem.scope == filters.scope.value)
    if filters.project_key is not None:
        conditions.append(MemoryItem.project_key == filters.project_key)
    if filters.status is not None:
        conditions.append(MemoryItem.status == filters.status.value)
    if filters.q:
        # lower() on both sides: the column's collation may be case-sensitive (SQLite's lower is
        # made Unicode-aware in app.db_types).
        conditions.append(sa.func.lower(MemoryItem.content).like(
            "%" + _escape_like(filters.q.lower()) + "%", escape="/"))
    return paginate(sa.select(MemoryItem).where(*conditions).order_by(*NEWEST_FIRST), request)


def _escape_like(text: str) -> str:
    """`text` matched literally by LIKE: its wildcards and the escape character escaped."""
    return text.replace("/", "//").replace("%", "/%").replace("_", "/_")


def project_keys_in_use(user_id: int) -> list[str]:
    """Distinct project keys the user has memories under, any status. A non-empty project_key
    only ever belongs to PROJECT rows: one range of idx_memory_project."""
    return list(db.session.scalars(
        sa.select(MemoryItem.project_key).distinct()
        .where(MemoryItem.user_id == user_id, MemoryItem.project_key != "")))


# ---- injection (seed §5.2) ------------------------------------------------------------------
# Run on the read engine (app.database.engines): this is the read every new agent session waits for.

_INJECT_COLUMNS = (MemoryItem.scope, MemoryItem.project_key, MemoryItem.content)


def _injected(*columns: Any, project: bool) -> sa.Select[Any]:
    """The injection read of one group: its newest ACTIVE rows up to the group's cap. The
    context block reads the text; the page reads the ids (`injected_ids`) — one selection."""
    group = (MemoryItem.project_key == sa.bindparam("project_key") if project
             else MemoryItem.scope == Scope.USER.value)
    return (sa.select(*columns)
            .where(MemoryItem.user_id == sa.bindparam("user_id"), group,
                   MemoryItem.status == Status.ACTIVE.value)
            .order_by(*NEWEST_FIRST).limit(INJECT_PROJECT_MAX if project else INJECT_USER_MAX))


INJECT_USER_ROWS = _injected(*_INJECT_COLUMNS, project=False)
INJECT_PROJECT_ROWS = _injected(*_INJECT_COLUMNS, project=True)
INJECTED_USER_IDS = _injected(MemoryItem.id, project=False)
INJECTED_PROJECT_IDS = _injected(MemoryItem.id, project=True)


@retry_conflicts
def injection_rows(user_id: int, project_key: str | None) -> Rows:
    """(scope, project_key, content) to inject: PROJECT rows first, then USER, newest first.
    Both reads in one round trip of the read engine (autocommit: no transaction to end), read
    again on a fresh connection when the pooled one turned out dead (a database restart)."""
    with hot_engines().reads.connect() as conn:
        if project_key is None:
            (user,) = batch(conn, rows(INJECT_USER_ROWS, {"user_id": user_id}))
            return user
        project, user = batch(
            conn, rows(INJECT_PROJECT_ROWS, {"user_id": user_id, "project_key": project_key}),
            rows(INJECT_USER_ROWS, {"user_id": user_id}))
        return project + user


def injected_ids(user_id: int, project_keys: Iterable[str]) -> set[int]:
    """Ids of the rows a new session gets today: the USER rows, and the PROJECT rows of each of
    `project_keys` (a session in that project). The same statements as `injection_rows`, on
    the request's session: the page marks what lies beyond them."""
    ids = set(db.session.scalars(INJECTED_USER_IDS, {"user_id": user_id}))
    for key in set(project_keys):
        ids.update(db.session.scalars(INJECTED_PROJECT_IDS,
                                      {"user_id": user_id, "project_key": key}))
    return ids


def owned_among(user_id: int, item_ids: Collection[int]) -> list[MemoryItem]:
    """The user's rows among `item_ids` (others' and absent ones left out)."""
    wanted = [i for i in item_ids if 0 < i <= ID_MAX]
    if not wanted:
        return []
    return list(db.session.scalars(sa.select(MemoryItem).where(
        MemoryItem.user_id == user_id, MemoryItem.id.in_(wanted))))


# ---- what extraction shows the model (D13) ---------------------------------------------------

@dataclass(frozen=True)
class Known:
    """A comparison-set row: a machine-made ACTIVE memory the model may reference by id."""

    id: int
    group: Group
    content: str
    version: int  # as the model was shown it: a touch or update applies only to this version


def _bound_group(*, project: bool, status: Status) -> list[Any]:
    """`_in_group` with the user and the project key as bind parameters (`_group_params`), for
    the statements the batches send: the user's USER rows, or (`project`) those of the
    bound project key; ACTIVE ones only the machine-made."""
    group = (MemoryItem.project_key == sa.bindparam("project_key") if project
             else MemoryItem.scope == Scope.USER.value)
    conditions = [MemoryItem.user_id == sa.bindparam("user_id"), group,
                  MemoryItem.status == status.value]
    if status is Status.ACTIVE:
        conditions.append(machine_made())
    return conditions


def _group_params(user_id: int, group: Group) -> dict[str, Any]:
    return {"user_id": user_id, **({"project_key": group.key} if group.project_key is not None
                                   else {})}


def _group_rows(columns: Sequence[Any], *, project: bool, status: Status,
                limit: int) -> sa.Select[Any]:
    """One group's rows of one status, newest first (`_bound_group`)."""
    return (sa.select(*columns).where(*_bound_group(project=project, status=status))
            .order_by(*NEWEST_FIRST).limit(limit))


# The comparison set of a group: its machine-made ACTIVE rows (MANUAL rows never appear: a
# user's own words are never matched or rewritten).
_COMPARISON = {project: _group_rows((MemoryItem.id, MemoryItem.content, MemoryItem.version),
                                    project=project,
                                    status=Status.ACTIVE, limit=ACTIVE_PER_USER_MAX)
               for project in (False, True)}
# The negative set's candidates of a group: its newest DISMISSED rows.
_DISMISSED = {project: _group_rows((MemoryItem.content, MemoryItem.updated_at, MemoryItem.id),
                                   project=project, status=Status.DISMISSED,
                                   limit=NEGATIVE_SET_MAX)
              for project in (False, True)}


class KnownSets(NamedTuple):
    """What extraction shows the model (D13)."""

    comparison: list[Known]  # each group's rows, newest first
    dismissed: list[str]  # the contents of the groups' newest DISMISSED rows, at most
    # NEGATIVE_SET_MAX in all


def known_sets(user_id: int, groups: Sequence[Group]) -> Read[KnownSets]:
    """The comparison and negative sets of `groups`, as one read of a batch: an index range
    scan per group and set. (One UNION ALL of them measured nearly twice as slow on MariaDB,
    the derived tables materialized.)"""
    comparisons = [(_COMPARISON[group.project_key is not None], _group_params(user_id, group))
                   for group in groups]
    dismissals = [(_DISMISSED[group.project_key is not None], _group_params(user_id, group))
                  for group in groups]

    def decode(results: Sequence[Rows]) -> KnownSets:
        compared, dismissed = results[:len(groups)], results[len(groups):]
        comparison = [Known(row[0], group, row[1], row[2])
                      for group, found in zip(groups, compared, strict=True) for row in found]
        newest = sorted((row for found in dismissed for row in found),
                        key=lambda row: (row[1], row[2]), reverse=True)
        return KnownSets(comparison, [row[0] for row in newest[:NEGATIVE_SET_MAX]])

    return Read((*comparisons, *dismissals), decode)


# ---- group sizes and consolidation inputs (D14, D15) ----------------------------------------

def group_counts(user_id: int, group: Group) -> tuple[int, int]:
    """(machine-made, other) ACTIVE rows of one group: its size against the D15 target, and how
    much of it consolidation may work on."""
    total, machine_rows = db.session.execute(
        sa.select(sa.func.count(), sa.func.sum(sa.case((machine_made(), 1), else_=0)))
        .where(*_in_group(user_id, group))).one()
    machine_rows = int(machine_rows or 0)
    return machine_rows, int(total or 0) - machine_rows


@dataclass(frozen=True)
class MachineRow:
    id: int
    content: str
    dedup_hash: str
    created_at: datetime
    updated_at: datetime
    version: int


def machine_rows(user_id: int, group: Group, ids: Collection[int] | None = None, *,
                 for_update: bool = False) -> list[MachineRow]:
    """A group's machine-made ACTIVE rows (all of them, or those of `ids`), newest first: all
    that a consolidation may read. MANUAL and DISMISSED rows never appear."""
    conditions = [*_in_group(user_id, group), machine_made()]
    if ids is not None:
        conditions.append(MemoryItem.id.in_(list(ids)))
    query = (sa.select(MemoryItem.id, MemoryItem.content, MemoryItem.dedup_hash,
                       MemoryItem.created_at, MemoryItem.updated_at, MemoryItem.version)
             .where(*conditions).order_by(*NEWEST_FIRST))
    found = db.session.execute(query.with_for_update() if for_update else query)
    return [MachineRow(*row) for row in found]


# A group's oldest-updated machine-made ACTIVE rows, the first `n`, locked: D14's candidates.
_STALEST = {project: (sa.select(MemoryItem.id)
                      .where(*_bound_group(project=project, status=Status.ACTIVE))
                      .order_by(MemoryItem.updated_at.asc(), MemoryItem.id.asc())
                      .limit(sa.bindparam("n")).with_for_update())
            for project in (False, True)}


def _displacement(user_id: int, group: Group, digest: str, exclude_ids: Collection[int]
                  ) -> Read[Displacement]:
    """`wording_and_stalest` as a read of a batch."""
    same_words = (BY_HASH, {"user_id": user_id, "digest": digest})
    stalest = (_STALEST[group.project_key is not None],
               {**_group_params(user_id, group), "n": len(exclude_ids) + 1})

    def decode(results: Sequence[Rows]) -> Displacement:
        wording, oldest = results
        stale = next((row[0] for row in oldest if row[0] not in exclude_ids), None)
        return Displacement(Wording(*wording[0]) if wording else None, stale)

    return Read((same_words, stalest), decode)


def wording_and_stalest(user_id: int, group: Group, digest: str,
                        exclude_ids: Collection[int]) -> Displacement:
    """Before an insert into a full pool (D14), in one round trip: the row that already says
    `digest`, if any, and the id of the group's oldest-updated machine-made ACTIVE row not in
    `exclude_ids` (rows the run has just written or confirmed), locked until the commit."""
    (found,) = batch(db.session.connection(), _displacement(user_id, group, digest, exclude_ids))
    return found


# ---- writes ---------------------------------------------------------------------------------

# `version` as a literal: the batch sends the values it compiled, and a Python-side column
# default is not one of them.
INSERT_ITEM = sa.insert(MemoryItem).values(
    {**{name: sa.bindparam(name) for name in ("user_id", "scope", "project_key", "content",
                                              "source", "status", "dedup_hash",
                                              "origin_session_id", "created_at", "updated_at")},
     "version": 1})
# The owner's bind parameter is not named `user_id`: executed with its values (SQLite's path
# of `batch`), an UPDATE takes a value named like one of its table's columns for its SET clause.
DEMOTE = (sa.update(MemoryItem)
          .where(MemoryItem.id == sa.bindparam("item_id"),
                 MemoryItem.user_id == sa.bindparam("owner_id"),
                 MemoryItem.status == Status.ACTIVE.value)
          .values(status=Status.DISMISSED.value, version=MemoryItem.version + 1,
                  updated_at=sa.bindparam("now")))


def _new_row(user_id: int, group: Group, content: str, digest: str, source: Source,
             session_id: int | None, created_at: datetime, updated_at: datetime
             ) -> Read[Written]:
    return written(INSERT_ITEM, {
        "user_id": user_id, "scope": group.scope.value, "project_key": group.key,
        "content": content, "source": source.value, "status": Status.ACTIVE.value,
        "dedup_hash": digest, "origin_session_id": session_id, "created_at": created_at,
        "updated_at": updated_at})


def _inserted_id(inserted: Written) -> int:
    assert inserted.lastrowid is not None  # an INSERT into a table with an AUTO_INCREMENT id
    return inserted.lastrowid


def insert(user_id: int, group: Group, content: str, digest: str, *, source: Source,
           session_id: int | None, created_at: datetime, updated_at: datetime) -> int:
    """A new ACTIVE row; its id. IntegrityError when the user has these words already."""
    (inserted,) = batch(db.session.connection(), _new_row(
        user_id, group, content, digest, source, session_id, created_at, updated_at))
    return _inserted_id(inserted)


def insert_and_demote(user_id: int, group: Group, content: str, digest: str, *,
                      session_id: int | None, now: datetime, stale_id: int) -> tuple[int, bool]:
    """A new AUTO row and, only if it went in, the D14 demotion of `stale_id` (an ACTIVE row
    becomes DISMISSED), in one round trip: the new row's id, and whether the other was still
    ACTIVE. IntegrityError (nothing demoted) when the user has these words already."""
    inserted, demoted = batch(
        db.session.connection(),
        _new_row(user_id, group, content, digest, Source.AUTO, session_id, now, now),
        written(DEMOTE, {"item_id": stale_id, "owner_id": user_id, "now": now}))
    return _inserted_id(inserted), demoted.rowcount == 1


def _update(user_id: int, item_id: int, conditions: Iterable[Any], **values: Any) -> bool:
    result = db.session.execute(
        sa.update(MemoryItem)
        .where(MemoryItem.id == item_id, MemoryItem.user_id == user_id, *conditions)
        .values(**values).execution_options(synchronize_session=False))
    return affected(result) == 1


def _shown(user_id: int, group: Group, version: int | None) -> list[Any]:
    """A machine-made ACTIVE row of the group; with `version`, only while still that version
    (what the model was shown, SPEC §11)."""
    conditions = [*_in_group(user_id, group), machine_made()]
    if version is not None:
        conditions.append(MemoryItem.version == version)
    return conditions


def touch(user_id: int, item_id: int, now: datetime, group: Group | None = None,
          version: int | None = None) -> bool:
    """Move updated_at of an ACTIVE row (a re-confirmation; the version stays); with `group`,
    only a machine-made row of that group, and with `version` only that version of it. False
    when no such row (any more)."""
    conditions = [MemoryItem.status == Status.ACTIVE.value]
    if group is not None:
        conditions += _shown(user_id, group, version)
    return _update(user_id, item_id, conditions, updated_at=now)


def machine_content(user_id: int, item_id: int, group: Group,
                    version: int | None = None) -> tuple[str, str] | None:
    """(content, dedup_hash) of a machine-made ACTIVE row of the group (with `version`: while
    still that version), or None."""
    row = db.session.execute(
        sa.select(MemoryItem.content, MemoryItem.dedup_hash)
        .where(MemoryItem.id == item_id, *_shown(user_id, group, version))).first()
    return None if row is None else (row.content, row.dedup_hash)


def rewrite(user_id: int, item_id: int, group: Group, content: str, digest: str,
            now: datetime, version: int | None = None) -> bool:
    """New words for a machine-made ACTIVE row of the group, with `version` only while still
    that version (the conditions re-checked in the write itself); the version goes up by one.
    IntegrityError when another row says them already."""
    return _update(user_id, item_id, _shown(user_id, group, version),
                   content=content, dedup_hash=digest, version=MemoryItem.version + 1,
                   updated_at=now)


def delete(user_id: int, item_ids: Collection[int], group: Group | None = None) -> int:
    """Delete rows of the user; with `group`, only its machine-made ACTIVE rows. The count."""
    item_ids = [i for i in item_ids if 0 < i <= ID_MAX]
    conditions = [MemoryItem.id.in_(list(item_ids)), MemoryItem.user_id == user_id]
    if group is not None:
        conditions += [*_in_group(user_id, group), machine_made()]
    result = db.session.execute(
        sa.delete(MemoryItem).where(*conditions).execution_options(synchronize_session=False))
    return affected(result)


# ---- the auto-capture switch (D9) -----------------------------------------------------------

AUTO_CAPTURE = (sa.select(UserMemoryPreference.auto_capture_enabled)
                .where(UserMemoryPreference.user_id == sa.bindparam("user_id")))


def capturing(found: Sequence[Row]) -> bool:
    """The switch from AUTO_CAPTURE's rows: no row means OFF."""
    return bool(found and found[0][0])


def auto_capture(user_id: int) -> Read[bool]:
    """The D9 switch, as a read of a batch."""
    return read(AUTO_CAPTURE, {"user_id": user_id}, capturing)


# The D9 switch of the bound `user_id` as a condition, for a statement that decides by it in
# the database (the webhook's event row): a user without a preference row has it off.
SWITCHED_ON = sa.exists().where(UserMemoryPreference.user_id == sa.bindparam("user_id"),
                                UserMemoryPreference.auto_capture_enabled.is_(True))


def auto_capture_enabled(user_id: int) -> bool:
    return capturing(db.session.execute(AUTO_CAPTURE, {"user_id": user_id}).all())


def set_auto_capture(user_id: int, enabled: bool, now: datetime) -> None:
    dialect = db.session.get_bind().dialect.name
    db.session.execute(upsert(
        table_of(UserMemoryPreference), dialect,
        {"user_id": user_id, "auto_capture_enabled": enabled, "created_at": now,
         "updated_at": now}, update=("auto_capture_enabled", "updated_at")))


# ---- every user's rows, for an operator's scan ------------------------------------------------

EVERY_CONTENT = sa.select(MemoryItem.id, MemoryItem.user_id, MemoryItem.content).order_by(
    MemoryItem.id)


def every_content(batch_size: int) -> Iterator[Sequence[tuple[int, int, str]]]:
    """(id, user id, content) of every memory of every user, in id order, `batch_size` rows at a
    time through one streamed query (a server-side cursor on MySQL): memory stays flat whatever
    the table holds. The read engine is AUTOCOMMIT: no transaction, no lock held meanwhile."""
    options = {"stream_results": True, "yield_per": batch_size}
    with hot_engines().reads.connect().execution_options(**options) as connection:
        yield from connection.execute(EVERY_CONTENT).partitions()
