"""Typed reads in one round trip (`app.database.batches`) on the real database."""

from __future__ import annotations

import gc

import sqlalchemy as sa
from flask import Flask

from app.database.batches import Read, batch, batch_all, read, rows, written
from app.database.engines import hot_engines


def _numbered(n: int) -> sa.Select:
    return sa.select(sa.literal_column(str(n)).label("n"))


def test_a_statement_built_per_call_is_sent_as_its_own_sql(app: Flask):
    # Built, sent and freed, one after another: a new statement often lives where the last one
    # did, and a cache keyed by the address answered it with the last one's SQL.
    with app.app_context(), hot_engines().reads.connect() as conn:
        for n in range(300):
            (found,) = batch(conn, rows(_numbered(n), {}))
            assert found == [(n,)]
            gc.collect(0)


def test_each_read_decodes_the_rows_of_its_own_statements(app: Flask):
    pair = Read(((_numbered(2), {}), (_numbered(3), {})),
                lambda results: [found[0][0] for found in results])
    with app.app_context(), hot_engines().reads.connect() as conn:
        first, both, last = batch(conn, read(_numbered(1), {}, lambda found: found[0][0]),
                                  pair, rows(_numbered(4), {}))
    assert (first, both, last) == (1, [2, 3], [(4,)])


def test_a_write_in_a_batch_is_read_back_as_what_it_changed(app: Flask):
    table = sa.table("batch_probe", sa.column("id"), sa.column("word"))
    insert = sa.insert(table).values(word=sa.bindparam("word"))
    with app.app_context(), hot_engines().writes.begin() as conn:
        conn.exec_driver_sql("CREATE TEMPORARY TABLE batch_probe "
                             "(id INT AUTO_INCREMENT PRIMARY KEY, word VARCHAR(10))")
        made = batch_all(conn, [written(insert, {"word": word}) for word in ("a", "b")])
        (changed,) = batch(conn, written(sa.update(table).values(word="c"), {}))
        conn.exec_driver_sql("DROP TEMPORARY TABLE batch_probe")
    assert [w.rowcount for w in made] == [1, 1]
    assert made[1].lastrowid == made[0].lastrowid + 1
    assert changed.rowcount == 2
