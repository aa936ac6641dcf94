"""A connection opened after the first of its URL builds no TLS context (`app.tls_reuse`): a
work horse, whose pools start empty at the fork, opens its connections without loading the CA
store again."""

from __future__ import annotations

import json
import os
import ssl

import sqlalchemy as sa

from app import tls_reuse
from app.database.pools import guard
from tests.conftest import TEST_DATABASE_URL


def _preferred_url() -> str:
    """The test URL as an operator would write it: no TLS option, PyMySQL's PREFERRED mode."""
    url = sa.make_url(TEST_DATABASE_URL)
    query = {k: v for k, v in url.query.items() if not k.startswith("ssl")}
    return url.set(query=query).render_as_string(hide_password=False)


def _count_contexts(monkeypatch) -> list[int]:
    built: list[int] = []
    real = ssl.create_default_context

    def counted(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counted)
    return built


def test_a_work_horse_opens_its_connections_without_building_a_tls_context(monkeypatch):
    monkeypatch.setattr(tls_reuse, "_learnt", {})
    built = _count_contexts(monkeypatch)
    engine = guard(sa.create_engine(_preferred_url()))
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        first = len(built)
        engine.dispose()
        for _ in range(3):  # new connections of this process
            with engine.connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            engine.dispose()
        assert len(built) == first
        read_end, write_end = os.pipe()
        child = os.fork()
        if child == 0:  # pragma: no cover - the child reports through the pipe
            before = len(built)
            with engine.connect() as conn:  # its pool started empty (app.database.pools)
                conn.exec_driver_sql("SELECT 1")
            os.write(write_end, json.dumps(len(built) - before).encode())
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as reader:
            in_child = json.loads(reader.read())
        os.waitpid(child, 0)
        assert in_child == 0, "the work horse built a TLS context for its connection"
    finally:
        engine.dispose()


def test_a_url_that_disables_tls_keeps_it_disabled(monkeypatch):
    monkeypatch.setattr(tls_reuse, "_learnt", {})
    built = _count_contexts(monkeypatch)
    url = sa.make_url(_preferred_url()).update_query_dict({"ssl_disabled": "true"})
    engine = guard(sa.create_engine(url))
    try:
        for _ in range(2):
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar() == 1
            engine.dispose()
        assert built == []
    finally:
        engine.dispose()
