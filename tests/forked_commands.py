"""`python -m flask …` commands started from a fork server that has already imported the
libraries they use.

A `flask --app wsgi worker` spends ~0.5 s of its ~0.65 s of CPU to start in importing Flask,
SQLAlchemy, redis-py, RQ, pydantic and the rest; the suite starts ~70 of them. A child of the
fork server imports the app itself, in its own environment, and runs the command as `python -m
flask` would: same code, same arguments, a process of its own (its pid, signals, exit status,
RQ's work horses forked from it).

This module imports nothing of the app: the fork server imports it to find `_run`, and the app
reads its environment when imported (the metrics directory, before prometheus_client, which is
left out of the preloaded libraries for the same reason).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

# What `import wsgi` loads that does not depend on the environment it is imported in.
PRELOADED = ["flask", "flask.cli", "werkzeug", "jinja2", "click", "dotenv", "sqlalchemy",
             "sqlalchemy.orm", "sqlalchemy.dialects.mysql", "sqlalchemy.dialects.sqlite",
             "pymysql", "flask_sqlalchemy", "flask_migrate", "flask_login", "flask_wtf", "redis",
             "rq", "rq.worker", "limits", "limits.storage", "pydantic", "pydantic_settings",
             "spectree"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOADED)


def _run(argv: list[str], env: dict[str, str], cwd: str, output: str) -> None:
    """In the forked child: become `python -m flask <argv>` in `env` and `cwd`."""
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    fd = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    sys.argv = ["flask", *argv]
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    from flask.cli import main
    try:
        main()
    finally:
        # What the interpreter does at exit; the fork server's child ends with os._exit.
        atexit._run_exitfuncs()


class ForkedCommand:
    """The parts of `subprocess.Popen` the tests use, for a command started by `start`."""

    def __init__(self, process: multiprocessing.process.BaseProcess, argv: list[str]) -> None:
        self._process = process
        self._argv = argv
        self.pid: int = process.pid  # type: ignore[assignment]

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self._argv, timeout or 0)
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def start(argv: list[str], *, env: dict[str, str], cwd: Path, output: Path) -> ForkedCommand:
    """`python -m flask <argv>` in `env` and `cwd`, stdout and stderr appended to `output`."""
    process = _context.Process(target=_run, args=(argv, env, str(cwd), str(output)),
                               daemon=False)
    process.start()
    return ForkedCommand(process, ["flask", *argv])
