"""One TLS context per process and database URL, not one per PyMySQL connection.

PyMySQL builds an `ssl.SSLContext` in every `Connection.__init__`: from the URL's `ssl_*` options,
or, with none (its PREFERRED mode), a default one that loads the whole system CA store — 25 ms
of CPU on a quiet machine, over 100 ms on a busy one — even against a server without TLS, which
then falls back to plain text. A web process pools its connections and pays it once; a work horse
starts with empty pools (no connection crosses a fork, `app.database.pools`) and paid it for every
connection of every job: most of what a forked job cost more than an unforked one
(`bench.run worker`).

So an engine learns from its first connection what PyMySQL found and asks every later one for
exactly that, through PyMySQL's public parameters (SQLAlchemy's `do_connect` event, the
documented place to change connect arguments):

- TLS in use: `ssl=<the context PyMySQL built for the first>`, the very settings the URL (or
  PREFERRED) gave it; the context is in memory only, no socket, so a horse shares its worker's.
  From then on TLS is required: a server that stops offering it is refused, never spoken to in
  plain text behind the operator's back.
- no TLS (the server offers none, or the URL says `ssl_disabled`): `ssl_disabled=True`, what
  PREFERRED falls back to anyway. A server that starts offering TLS is used with it after the
  process restarts.
"""

from __future__ import annotations

import threading
from typing import Any

import sqlalchemy as sa
from pymysql.constants import CLIENT

# What each database URL's first connection found: the TLS context to reuse, or None for none.
_learnt: dict[str, Any] = {}
_lock = threading.Lock()
# The URL options PyMySQL builds its context from: replaced by the context itself once learnt.
TLS_OPTIONS = ("ssl", "ssl_ca", "ssl_cert", "ssl_key", "ssl_key_password", "ssl_verify_cert",
               "ssl_verify_identity", "ssl_disabled")


def _key(engine: sa.Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def share_tls_context(engine: sa.Engine) -> None:
    """Connections of `engine` after its first reuse that one's TLS decision and context."""
    if engine.dialect.driver != "pymysql":
        return
    key = _key(engine)

    @sa.event.listens_for(engine, "do_connect")
    def reuse(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> None:
        if key not in _learnt:
            return None  # the first: PyMySQL decides, `learn` keeps what it decided
        for option in TLS_OPTIONS:
            cparams.pop(option, None)
        context = _learnt[key]
        if context is None:
            cparams["ssl_disabled"] = True
        else:
            cparams["ssl"] = context
        return None  # SQLAlchemy connects with these parameters

    @sa.event.listens_for(engine, "connect")
    def learn(dbapi_connection: Any, record: Any) -> None:
        if key in _learnt:
            return
        # PyMySQL meant TLS (`ssl`, its context in `ctx`) and the server offered it: the
        # handshake wrapped the socket, or it would have raised.
        secure = bool(dbapi_connection.ssl
                      and dbapi_connection.server_capabilities & CLIENT.SSL)
        with _lock:
            _learnt.setdefault(key, dbapi_connection.ctx if secure else None)
