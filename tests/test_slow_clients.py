"""Slow clients (SPEC §9, production): the README's production command keeps answering while
clients hold connections open half-sent. With gunicorn's sync workers each such socket held a
whole worker until its 30 s timeout, so two of them stalled a two-worker service; the gthread
worker gives an idle socket one thread of a worker, not the worker."""

from __future__ import annotations

import re
import shlex
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

from tests.serving import ROOT, free_port, process_env, web_process


def production_command(port: int, workers: int) -> list[str]:
    """The web line of the README's production setup, on a local port, with `workers`."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    line = next(line for line in readme.splitlines()
                if line.startswith(".venv/bin/gunicorn") and line.rstrip().endswith("# web"))
    words = shlex.split(line.split("#", 1)[0])
    command = [sys.executable, "-m", "gunicorn", *words[1:]]
    for flag, value in (("-b", f"127.0.0.1:{port}"), ("-w", str(workers))):
        command[command.index(flag) + 1] = value
    return command


@contextmanager
def half_sent(port: int, request: bytes) -> Iterator[socket.socket]:
    """A client that sends `request` and then nothing more, its connection left open."""
    with socket.create_connection(("127.0.0.1", port)) as client:
        client.sendall(request)
        yield client


IDLE_REQUESTS = [
    # Headers done, a body of 100 bytes announced, 5 sent (the login form reads its body first).
    b"POST /login HTTP/1.1\r\nHost: memory\r\n"
    b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nusern",
    # Headers never finished.
    b"GET /healthz HTTP/1.1\r\nHost: memory\r\nX-Slow: ",
]


def test_the_production_command_answers_while_idle_clients_hold_every_worker(tmp_path):
    port = free_port()
    workers = len(IDLE_REQUESTS)
    assert re.search(r"gthread", " ".join(production_command(port, workers)))
    with web_process(production_command(port, workers), tmp_path, "gunicorn", port,
                     process_env()) as served, ExitStack() as idle:
        for request in IDLE_REQUESTS:
            idle.enter_context(half_sent(port, request))
        time.sleep(1)  # every worker has taken one of them by now
        started = time.monotonic()
        with urllib.request.urlopen(served.url + "/healthz", timeout=10) as response:
            assert response.status == 200
        assert time.monotonic() - started < 2
