"""The service really listening: `flask serve` and gunicorn subprocesses, or an app in a thread.

Subprocesses run on the test database (and Redis when asked), on free ports of 127.0.0.1, with
their output in files a test can read and a failure can show.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from flask import Flask
from werkzeug.serving import make_server

import jobs
from app import create_app
from tests.conftest import TEST_DATABASE_URL

ROOT = Path(__file__).resolve().parent.parent
# Variables of the developer's shell that would change what a started process does.
_UNSET = ("REDIS_URL", "MEMORY_SERVICE_TOKEN", "MEMORY_WEBHOOK_SECRET", "SECRET_KEY",
          "FLASK_ENV", "APP_ENV")


def app_in(instance_path: str) -> Flask:
    """The app as `wsgi` builds it, its instance folder moved to `instance_path`: a test's
    `flask --app "tests.serving:app_in('…')" serve` never writes into the checkout's
    instance/."""
    app = create_app()
    jobs.init_app(app)
    app.instance_path = instance_path
    return app


@functools.cache
def modules_after_import_wsgi() -> frozenset[str]:
    """The modules a new process holds once it has imported `wsgi`, as every web process, worker
    and command starts (asked once per test process)."""
    result = subprocess.run([sys.executable, "-c", "import sys, wsgi; print(*sys.modules)"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    return frozenset(result.stdout.strip().splitlines()[-1].split())


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def process_env(**extra: str) -> dict[str, str]:
    """The test database, nothing else of the caller's service settings; `extra` on top."""
    env = {name: value for name, value in os.environ.items() if name not in _UNSET}
    env.update({"DATABASE_URL": TEST_DATABASE_URL, "PYTHONUNBUFFERED": "1"})
    env.update(extra)
    return env


@dataclass
class Served:
    """A started web process: where it listens and what it printed."""

    url: str
    process: subprocess.Popen
    stdout: Path
    stderr: Path

    def output(self) -> str:
        return self.stdout.read_text(encoding="utf-8")

    def log(self) -> str:
        return self.stderr.read_text(encoding="utf-8")


# What `flask serve` and gunicorn print when their port was taken before they could bind it.
_PORT_TAKEN = ("Address already in use", "Connection in use")


class PortTaken(AssertionError):
    """The free port picked for a web process was taken before it bound it (by another test's
    process, or as the source port of an outgoing connection)."""


def _wait_until_listening(served: Served, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(served.url + "/healthz", timeout=2):
                return
        except (urllib.error.URLError, OSError):
            if served.process.poll() is not None:
                log = served.log()[-3000:]
                failure = PortTaken if any(taken in log for taken in _PORT_TAKEN) \
                    else AssertionError
                raise failure(f"{served.url} exited: {log}") from None
            assert time.monotonic() < deadline, f"{served.url} never answered"
            time.sleep(0.1)


@contextlib.contextmanager
def web_process(command: list[str], log_dir: Path, name: str, port: int,
                env: dict[str, str]) -> Iterator[Served]:
    """Start `command` (listening on `port`), wait until it answers; stop it on exit."""
    stdout, stderr = log_dir / f"{name}.out", log_dir / f"{name}.err"
    with stdout.open("w") as out, stderr.open("w") as err:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=err)
    served = Served(f"http://127.0.0.1:{port}", process, stdout, stderr)
    try:
        _wait_until_listening(served)
        yield served
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def _on_a_free_port(command_for: Callable[[int], list[str]], log_dir: Path, name: str,
                    env: dict[str, str], attempts: int = 3) -> Iterator[Served]:
    """`web_process` of `command_for(port)` on a free port, on another one when the port was
    taken between `free_port` and the process binding it."""
    for _ in range(attempts):
        port = free_port()
        with contextlib.ExitStack() as stack:
            try:
                served = stack.enter_context(
                    web_process(command_for(port), log_dir, name, port, env))
            except PortTaken:
                continue
            yield served
            return
    raise AssertionError(f"{name}: {attempts} free ports were each taken before it bound them")


@contextlib.contextmanager
def serve(instance: Path, log_dir: Path, name: str = "serve", **env: str) -> Iterator[Served]:
    """`flask serve` with its instance folder at `instance`; `env` over `process_env()`."""
    with _on_a_free_port(lambda port: [
            sys.executable, "-m", "flask", "--app", f"tests.serving:app_in({str(instance)!r})",
            "serve", "--port", str(port)], log_dir, name, process_env(**env)) as served:
        yield served


@contextlib.contextmanager
def gunicorn(log_dir: Path, name: str, **env: str) -> Iterator[Served]:
    """`gunicorn wsgi:app`, one worker process, as in production."""
    with _on_a_free_port(lambda port: [
            sys.executable, "-m", "gunicorn", "-w", "1", "-b", f"127.0.0.1:{port}", "wsgi:app"],
            log_dir, name, process_env(**env)) as served:
        yield served


def _closed_before_sending(app: WSGIApplication) -> WSGIApplication:
    """`app` with each body read whole and its iterable closed before the server sends it.

    werkzeug's development server closes the iterable only after reading what is left on the
    socket, and that read raises when the client has reset the connection (a browser cancelling
    a favicon it no longer needs): the file of a static response is then left open, and the
    ResourceWarning it raises when collected fails whichever test is running."""
    def served(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        iterable = app(environ, start_response)
        try:
            return [b"".join(iterable)]
        finally:
            if hasattr(iterable, "close"):
                iterable.close()
    return served


class AppsInTurn:
    """A WSGI app handing each request to the app of the test running now.

    One server per test process serves every test on one origin, so a browser can keep its
    contexts from test to test. Between tests it answers 503, and `serving` waits until its
    test's requests have finished before it hands over, so none reaches the next test's tables.
    """

    def __init__(self) -> None:
        self._app: WSGIApplication | None = None
        self._in_flight = 0
        self._changed = threading.Condition()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        with self._changed:
            app = self._app
            if app is None:
                start_response("503 Service Unavailable", [("Content-Type", "text/plain")])
                return [b"between tests"]
            self._in_flight += 1
        try:
            # The body is read here, so the request counts until it has been produced whole.
            return _closed_before_sending(app)(environ, start_response)
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    @contextlib.contextmanager
    def serving(self, app: WSGIApplication, drain_timeout_s: float = 10) -> Iterator[None]:
        with self._changed:
            self._app = app
        try:
            yield
        finally:
            with self._changed:
                self._app = None
                drained = self._changed.wait_for(lambda: self._in_flight == 0, drain_timeout_s)
            assert drained, f"a request was still being served {drain_timeout_s} s after the test"


@contextlib.contextmanager
def in_thread(app: WSGIApplication) -> Iterator[str]:
    """`app` on a free port of 127.0.0.1, served from a thread of this process; its URL."""
    server = make_server("127.0.0.1", 0, _closed_before_sending(app), threaded=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
