"""WSGI entry point: `flask --app wsgi …` and `gunicorn wsgi:app`."""

from dotenv import load_dotenv

load_dotenv()

from app import create_app  # noqa: E402

app = create_app()
