"""What a MariaDB Galera cluster needs of the service's connections (docs/operations-galera.md).

Galera replicates a commit synchronously but applies it on the other nodes a moment later, so a
node may answer a read from before a change another node has already committed. The context
cache would then store the older block under the current version and serve it until the next
change. Every connection to a Galera node therefore asks for causal reads
(`wsrep_sync_wait = 1`): a read first waits until its node has applied everything the cluster
committed before the read began. On any other server the setting does not exist and nothing is
sent but the one probe per new connection.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from flask import Flask

from app.database.engines import EXTENSION as HOT_ENGINES
from app.extensions import db

# Bit 1: reads (SELECT, SHOW, BEGIN) wait for the cluster's commits before they start.
SYNC_WAIT_READS = 1


def causal_reads(dbapi_connection: Any, _record: Any) -> None:
    """On a new connection: causal reads when the server is a Galera node."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("SHOW VARIABLES LIKE 'wsrep_on'")
        row = cursor.fetchone()
        if row is not None and str(row[1]).upper() == "ON":
            cursor.execute(f"SET SESSION wsrep_sync_wait = {SYNC_WAIT_READS}")
    finally:
        cursor.close()


def init_app(app: Flask) -> None:
    if not app.config["SQLALCHEMY_DATABASE_URI"].startswith(("mysql", "mariadb")):
        return
    with app.app_context():
        engines = {db.engine, app.extensions[HOT_ENGINES].reads,
                   app.extensions[HOT_ENGINES].writes}
    for engine in engines:
        sa.event.listen(engine, "connect", causal_reads)
