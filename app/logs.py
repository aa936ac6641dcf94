"""One log format in every process (SPEC §11 "Tracing and logs"): serve, gunicorn's master and
workers, the RQ worker, its work horses and scheduler, every CLI command.

A line is `<ISO time> <LEVEL> <logger> event=… key=value…`, or with `MEMORY_LOG_FORMAT=json` one
JSON object per line with the same fields. The service's own messages are already `event=…
key=value`; a library's message (RQ, werkzeug, gunicorn) becomes `event=log message="…"`, so a
reader or a log pipeline meets one shape. It is configured through the logging library's own
configuration (`logging.config.dictConfig`, which gunicorn takes as `logconfig_dict`), one
handler on the root logger, so no library's own handler or formatter remains beside it.

Every line logged while a request is served, or while the job it enqueued runs, carries the
request's id (`request_id=`): `X-Request-Id` when the caller sent a usable one, else a new one,
echoed in the response (`RequestIds`, around every path, the two hot ones included); the job
carries it in `job.meta` (`job_meta`, `bound`).
"""

from __future__ import annotations

import json
import logging
import logging.config
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from app.misconfigured import ConfigurationError

FORMAT_VARIABLE = "MEMORY_LOG_FORMAT"
FORMATS = ("text", "json")
REQUEST_ID_HEADER = "X-Request-Id"
ENVIRON_KEY = "memory.request_id"
# The key a job's request id travels under in `job.meta`.
META_KEY = "request_id"
# An id taken from a caller goes into every line as it is: printable, no spaces or quotes (a
# newline would forge a log line), and short.
_USABLE_ID = re.compile(r"[A-Za-z0-9._:/+=@-]{1,128}")
_FIELD = re.compile(r"(\w+)=(.*?)(?= \w+=|$)", re.DOTALL)

request_id: ContextVar[str | None] = ContextVar("memory_request_id", default=None)


def log_format(env: Mapping[str, str] = os.environ) -> str:
    """`text` (default) or `json`; anything else is a one-line configuration error."""
    value = (env.get(FORMAT_VARIABLE) or "text").strip().lower()
    if value not in FORMATS:
        raise ConfigurationError(f"{FORMAT_VARIABLE} must be one of {', '.join(FORMATS)}, "
                                 f"not {env.get(FORMAT_VARIABLE)!r}")
    return value


def dict_config(fmt: str, level: int | str = logging.INFO) -> dict[str, Any]:
    """The whole configuration, for `logging.config.dictConfig` and gunicorn's `logconfig_dict`:
    one stderr handler on the root logger; gunicorn's two loggers lose their own handlers and
    hand their lines to it."""
    formatter = JsonFormatter if fmt == "json" else TextFormatter
    passed_up = {"level": "INFO", "handlers": [], "propagate": True}
    return {
        "version": 1,
        # Loggers made before (the app's modules') keep working.
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": f"{__name__}.RequestIdFilter"}},
        "formatters": {"memory": {"()": f"{__name__}.{formatter.__name__}"}},
        "handlers": {"stderr": {"class": "logging.StreamHandler", "stream": "ext://sys.stderr",
                                "formatter": "memory", "filters": ["request_id"]}},
        "root": {"level": level, "handlers": ["stderr"]},
        "loggers": {"gunicorn.error": passed_up, "gunicorn.access": passed_up},
    }


def configured() -> bool:
    """The root logger already writes this module's format (gunicorn's master configured it
    before forking the worker that imports the app)."""
    return any(isinstance(handler.formatter, TextFormatter)
               for handler in logging.getLogger().handlers)


def configure(level: int = logging.WARNING) -> None:
    """This process logs in the one format from now on, at `level` or below it if already
    lower. Commands log warnings; `serve` and `worker` ask for INFO (their job events)."""
    root = logging.getLogger()
    if configured():
        root.setLevel(min(root.level, level))
        return
    logging.config.dictConfig(dict_config(log_format(), level))


def _iso(created: float) -> str:
    return datetime.fromtimestamp(created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def quoted(text: str) -> str:
    """`text` as one JSON string: a value with spaces or newlines stays one field of one line."""
    return json.dumps(text, ensure_ascii=False)


class RequestIdFilter(logging.Filter):
    """Puts the id of the request (or job) being served on each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = request_id.get()
        return True


class TextFormatter(logging.Formatter):
    """`<ISO time> <LEVEL> <logger> event=… key=value…[ request_id=…]`, one line a record (a
    traceback goes into `exception="…"` with its newlines escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        if message.startswith("event="):
            message = message.replace("\n", "\\n")
        else:
            message = f"event=log message={quoted(message)}"
        line = f"{_iso(record.created)} {record.levelname} {record.name} {message}"
        found = getattr(record, "request_id", None)
        if found and " request_id=" not in message:
            line += f" request_id={found}"
        if record.exc_info:
            line += f" exception={quoted(self.formatException(record.exc_info))}"
        return line


def _value(text: str) -> Any:
    if text.startswith('"'):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


class JsonFormatter(TextFormatter):
    """One JSON object a line: time, level, logger, event, the message's other key=value fields,
    request_id."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry: dict[str, Any] = {"time": _iso(record.created), "level": record.levelname,
                                 "logger": record.name}
        if message.startswith("event="):
            entry.update((key, _value(value)) for key, value in _FIELD.findall(message))
        else:
            entry.update(event="log", message=message)
        found = getattr(record, "request_id", None)
        if found:
            entry.setdefault("request_id", found)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def new_request_id() -> str:
    return os.urandom(16).hex()


def usable_request_id(sent: str | None) -> str:
    """The caller's id when it is usable in a log line, else a new one."""
    if sent is not None and _USABLE_ID.fullmatch(sent):
        return sent
    return new_request_id()


class RequestIds:
    """WSGI middleware around every path (the hot paths too): the request's id for its lines and
    in its response's `X-Request-Id`."""

    def __init__(self, app: WSGIApplication) -> None:
        self.app = app

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        rid = usable_request_id(environ.get("HTTP_X_REQUEST_ID"))
        # For the server's own line about the request, written after this returns (`serve`'s;
        # gunicorn's access line takes it from the response header).
        environ[ENVIRON_KEY] = rid

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            headers.append((REQUEST_ID_HEADER, rid))
            return start_response(status, headers, exc_info)

        token = request_id.set(rid)
        try:
            return self.app(environ, start)
        finally:
            # The server thread's next lines are not this request's.
            request_id.reset(token)


def job_meta() -> dict[str, str]:
    """What a job enqueued now carries of its request in `job.meta`."""
    rid = request_id.get()
    return {META_KEY: rid} if rid else {}


@contextmanager
def bound(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """The lines logged inside carry the request id a job's `meta` holds (none: unchanged)."""
    rid = (meta or {}).get(META_KEY)
    if not rid:
        yield
        return
    token = request_id.set(rid)
    try:
        yield
    finally:
        request_id.reset(token)
