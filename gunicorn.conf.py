"""gunicorn's settings for `gunicorn wsgi:app`, read from the working directory (the checkout).

Everything else (workers, bind address, timeouts) stays on the command line or in
GUNICORN_CMD_ARGS; this file only adds what the master must do once for the installation,
before it forks any worker.
"""

from __future__ import annotations

import sys
from pathlib import Path


def on_starting(server: object) -> None:
    """Once, in the master: a malformed configuration stops the start in one line naming the
    variable (rather than every worker failing to boot with a traceback, respawned forever);
    then the installation's metrics directory is cleaned of earlier runs' files, as
    prometheus-client's multiprocess mode requires — by the master only, never by a worker,
    whose siblings are already counting."""
    from dotenv import load_dotenv

    load_dotenv()
    from app import config

    try:
        config.from_environment(str(Path(__file__).resolve().parent / "instance"))
    except config.ConfigurationError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        sys.exit(1)

    from app import metrics

    metrics.clean_stale_files()
