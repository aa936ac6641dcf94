"""gunicorn's settings for `gunicorn wsgi:app`, read from the working directory (the checkout).

Everything else (workers, bind address, timeouts) stays on the command line or in
GUNICORN_CMD_ARGS; this file only adds what the master must do once for the installation,
before it forks any worker: the one log format, the installation's control socket, the start's
checks.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from dotenv import load_dotenv
from gunicorn.glogging import Logger

# Before anything reads the environment (MEMORY_LOG_FORMAT below, the config at on_starting).
load_dotenv()

from app import logs  # noqa: E402
from app.misconfigured import ConfigurationError  # noqa: E402

CHECKOUT = Path(__file__).resolve().parent
INSTANCE = CHECKOUT / "instance"

try:
    _format = logs.log_format()
except ConfigurationError as exc:
    print(f"Error: {exc}", file=sys.stderr)
    sys.exit(1)

# The one log format (app.logs) for the master, its workers and the app in them: gunicorn hands
# this to logging.config.dictConfig. Its own lines, the access line included, go through it.
logconfig_dict = logs.dict_config(_format)


class AccessLinesWhenAsked(Logger):
    """gunicorn writes an access line for every request as soon as a logging configuration is
    given; as without one, only with `--access-logfile` (a line to format and write for each of
    thousands of context reads a second)."""

    def access(self, resp: object, req: object, environ: object, request_time: object) -> None:
        if self.cfg.accesslog:
            super().access(resp, req, environ, request_time)


logger_class = AccessLinesWhenAsked
# The access line (`--access-logfile -`) as key=value fields; the request id is the one the
# response echoed.
access_log_format = ('event=http.request remote=%(h)s method=%(m)s path="%(U)s" '
                     'status=%(s)s bytes=%(B)s duration_ms=%(M)s '
                     'request_id=%({x-request-id}o)s')
# gunicorn's default control socket is one per user ($XDG_RUNTIME_DIR or ~/.gunicorn/gunicorn.ctl),
# shared by every installation on the host, and removed by whichever exits first: this
# installation's own, in its instance folder (`--no-control-socket` turns it off).
control_socket = str(INSTANCE / "gunicorn.ctl")


def on_starting(server: object) -> None:
    """Once, in the master: a malformed configuration stops the start in one line naming the
    variable (rather than every worker failing to boot with a traceback, respawned forever);
    each dependency that does not answer is one line naming it (the start goes on: `/readyz`
    answers 503 until it answers); then the installation's metrics directory is cleaned of
    earlier runs' files, as prometheus-client's multiprocess mode requires — by the master
    only, never by a worker, whose siblings are already counting."""
    from app import config, startup

    try:
        settings = config.from_environment(str(INSTANCE))
    except ConfigurationError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)
    INSTANCE.mkdir(exist_ok=True)

    log = logging.getLogger("app.startup")
    for dependency, line in startup.unreachable_dependencies(settings, config.MIGRATIONS_DIR):
        log.error("event=startup.dependency_unreachable dependency=%s message=%s", dependency,
                  logs.quoted(line))

    from app import metrics

    metrics.clean_stale_files()
