"""WSGI entry point: `flask --app wsgi …` and `gunicorn wsgi:app`.

The one place the web app and the background jobs are put together: `app/` never imports
`jobs/`, which hands the app its job kinds and the `worker` command.
"""

import os

from dotenv import load_dotenv

load_dotenv()

import jobs  # noqa: E402
from app import create_app, logs, startup  # noqa: E402
from app.misconfigured import ConfigurationError  # noqa: E402

if os.environ.get("FLASK_RUN_FROM_CLI"):
    # `flask --app wsgi …`: a database or Redis that does not answer ends a command in one line.
    startup.install()

try:
    # Every process logs in the one format (app.logs), from here on; a gunicorn worker keeps
    # the configuration its master made (gunicorn.conf.py).
    logs.configure()
    app = create_app()
except ConfigurationError as exc:
    # One line naming the variable, exit status 1 — also where Flask's CLI would otherwise
    # print the traceback (its command listing catches every Exception, not SystemExit).
    raise SystemExit(f"Error: {exc}") from None
jobs.init_app(app)
