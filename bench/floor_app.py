"""gunicorn target for the context benchmark: the real app plus a raw-cursor floor endpoint.

`/floor/context` runs the same two SQL reads as the context endpoint through one persistent
PyMySQL connection per worker, with no auth, no ORM and no shaping: the physical floor that
the real endpoint is compared with under the same server.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from bench.common import BENCH_DB, raw_connection
from wsgi import app as service

USER_SQL = ("SELECT scope, project_key, content FROM memory_item WHERE user_id = %s "
            "AND scope = 'USER' AND status = 'ACTIVE' ORDER BY updated_at DESC, id DESC LIMIT 8")
PROJECT_SQL = ("SELECT scope, project_key, content FROM memory_item WHERE user_id = %s "
               "AND project_key = %s AND status = 'ACTIVE' "
               "ORDER BY updated_at DESC, id DESC LIMIT 12")

_connection = None


def _cursor():
    global _connection
    if _connection is None:
        _connection = raw_connection(BENCH_DB)
    return _connection.cursor()


def floor_context(environ, start_response):
    query = parse_qs(environ.get("QUERY_STRING", ""))
    user_id = int(query["userId"][0])
    project_key = query.get("projectKey", [""])[0]
    with _cursor() as cursor:
        rows = []
        if project_key:
            cursor.execute(PROJECT_SQL, (user_id, project_key))
            rows += cursor.fetchall()
        cursor.execute(USER_SQL, (user_id,))
        rows += cursor.fetchall()
    body = json.dumps(rows, ensure_ascii=False).encode()
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(body)))])
    return [body]


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/floor/context":
        return floor_context(environ, start_response)
    return service(environ, start_response)
