"""The context cache under a race (issue 12): writers change a memory through two web processes
while readers read the user's context block through both, continuously. Every read must show a
state at least as new as the last change committed before the read began — the cache never
serves a block older than a committed change, whichever process cached it."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import redis

from app.memory.context_cache import KEY_PREFIX
from app.system.installation import installation
from tests.conftest import SERVICE_TOKEN, TEST_REDIS_URL, assert_ok
from tests.serving import gunicorn

WRITES = 150
READERS = 6
WEB_ENV = {"REDIS_URL": TEST_REDIS_URL, "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN,
           "SECRET_KEY": "one-key-for-every-web-process"}


@dataclass(frozen=True)
class Span:
    began: int
    ended: int
    marker: int


def _call(url: str, headers: dict[str, str], method: str = "GET",
          body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={**headers, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())["data"]


def _marker(block: dict) -> int:
    (line,) = [m["content"] for m in block["memories"] if m["content"].startswith("marker ")]
    return int(line.split()[1])


def test_no_read_is_older_than_a_change_committed_before_it(app, alice, tmp_path):
    item = assert_ok(alice.post("/api/v1/memory", {"scope": "USER", "content": "marker 0"}), 201)
    platform = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
    with (gunicorn(tmp_path, "web-a", **WEB_ENV) as web_a,
          gunicorn(tmp_path, "web-b", **WEB_ENV) as web_b):
        webs = (web_a.url, web_b.url)
        context = f"/api/v1/internal/memory/context?userId={alice.user_id}&projectKey=mao"
        _call(webs[0] + context, platform)
        with app.app_context():
            prefix = KEY_PREFIX.format(namespace=installation().namespace)
        # The web process stores the block once its answer is sent (`app.after_response`).
        client = redis.Redis.from_url(TEST_REDIS_URL)
        deadline = time.monotonic() + 5
        while (cached := client.hget(f"{prefix}{alice.user_id}", "b:mao")) is None \
                and time.monotonic() < deadline:
            time.sleep(0.01)
        client.close()
        assert cached is not None, "the first read did not fill the cache"

        writes: list[Span] = []
        reads: list[Span] = []
        done = threading.Event()

        def write() -> None:
            try:
                for n in range(1, WRITES + 1):
                    began = time.monotonic_ns()
                    _call(f"{webs[n % 2]}/api/v1/memory/{item['id']}", alice.headers, "PATCH",
                          {"content": f"marker {n}"})
                    writes.append(Span(began, time.monotonic_ns(), n))
            finally:
                done.set()

        def read(reader: int) -> None:
            n = 0
            while not done.is_set():
                began = time.monotonic_ns()
                block = _call(webs[(reader + n) % 2] + context, platform)
                reads.append(Span(began, time.monotonic_ns(), _marker(block)))
                n += 1

        with ThreadPoolExecutor(READERS + 1) as pool:
            futures = [pool.submit(write)] + [pool.submit(read, r) for r in range(READERS)]
            for future in futures:
                future.result()

    assert len(writes) == WRITES and len(reads) > WRITES
    stale = []
    for span in reads:
        committed = max((w.marker for w in writes if w.ended < span.began), default=0)
        started = max((w.marker for w in writes if w.began < span.ended), default=0)
        if not committed <= span.marker <= started:
            stale.append((span, committed, started))
    assert stale == [], f"{len(stale)} of {len(reads)} reads out of their time: {stale[:5]}"
