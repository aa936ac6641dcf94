"""WSGI entry point: `flask --app wsgi …` and `gunicorn wsgi:app`.

The one place the web app and the background jobs are put together: `app/` never imports
`jobs/`, which hands the app its job kinds and the `worker` command.
"""

from dotenv import load_dotenv

load_dotenv()

import jobs  # noqa: E402
from app import create_app  # noqa: E402

app = create_app()
jobs.init_app(app)
