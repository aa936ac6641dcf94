"""gunicorn target of the HTTP benchmarks: the real app plus two floor endpoints.

Each floor is a bare WSGI function doing the same durable work as the endpoint it is compared
with, through one persistent PyMySQL connection (and Redis client) per worker, with no framework,
no auth beyond what the work itself needs, and no shaping — what the service cannot go below:

- `/floor/context` runs the context endpoint's two SQL reads;
- `/floor/webhook` verifies the HMAC, inserts the event row and commits, and pushes one RQ job
  (the leanest way RQ's public API offers: one pipelined round trip).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from urllib.parse import parse_qs

import redis
from rq import Queue

from bench.common import BENCH_DB, BENCH_REDIS_URL, FLOOR_QUEUE, WEBHOOK_SECRET, raw_connection
from wsgi import app as service

USER_SQL = ("SELECT scope, project_key, content FROM memory_item WHERE user_id = %s "
            "AND scope = 'USER' AND status = 'ACTIVE' ORDER BY updated_at DESC, id DESC LIMIT 8")
PROJECT_SQL = ("SELECT scope, project_key, content FROM memory_item WHERE user_id = %s "
               "AND project_key = %s AND status = 'ACTIVE' "
               "ORDER BY updated_at DESC, id DESC LIMIT 12")
EVENT_SQL = ("INSERT INTO webhook_event (event_id, session_id, user_id, phase, reason, "
             "received_at) VALUES (%s, %s, %s, %s, 'enqueued', %s)")

_connection = None
_queue = None


def _db():
    global _connection
    if _connection is None:
        _connection = raw_connection(BENCH_DB)
    return _connection


def _answer(start_response, status: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", "application/json"),
                            ("Content-Length", str(len(body)))])
    return [body]


def floor_context(environ, start_response):
    query = parse_qs(environ.get("QUERY_STRING", ""))
    user_id = int(query["userId"][0])
    project_key = query.get("projectKey", [""])[0]
    with _db().cursor() as cursor:
        rows = []
        if project_key:
            cursor.execute(PROJECT_SQL, (user_id, project_key))
            rows += cursor.fetchall()
        cursor.execute(USER_SQL, (user_id,))
        rows += cursor.fetchall()
    return _answer(start_response, "200 OK", json.dumps(rows, ensure_ascii=False).encode())


def floor_webhook(environ, start_response):
    global _queue
    raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    timestamp = environ.get("HTTP_X_MEMORY_TIMESTAMP", "")
    expected = "sha256=" + hmac.new(WEBHOOK_SECRET.encode(), timestamp.encode() + b"." + raw,
                                    hashlib.sha256).hexdigest()
    if not hmac.compare_digest(environ.get("HTTP_X_MEMORY_SIGNATURE", "").encode(),
                               expected.encode()):
        return _answer(start_response, "401 Unauthorized", b"{}")
    event = json.loads(raw)
    connection = _db()
    connection.begin()
    with connection.cursor() as cursor:
        cursor.execute(EVENT_SQL, ("floor-" + event["eventId"], event["sessionId"],
                                   event["userId"], event["phase"],
                                   time.strftime("%Y-%m-%d %H:%M:%S")))
    if _queue is None:
        _queue = Queue(FLOOR_QUEUE, connection=redis.Redis.from_url(BENCH_REDIS_URL))
    job = _queue.create_job("json.dumps", args=(event,), job_id="floor-" + hashlib.sha1(
        event["eventId"].encode()).hexdigest())
    pipe = _queue.connection.pipeline()
    _queue.enqueue_job(job, pipeline=pipe)
    pipe.execute()
    connection.commit()
    return _answer(start_response, "202 Accepted", b'{"accepted":true}')


FLOORS = {"/floor/context": floor_context, "/floor/webhook": floor_webhook}


def app(environ, start_response):
    floor = FLOORS.get(environ.get("PATH_INFO"))
    if floor is not None:
        return floor(environ, start_response)
    return service(environ, start_response)

