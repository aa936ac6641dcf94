"""What an operator sees when a command or the server starts: one line per problem, naming the
variable or the service, never a traceback for a configuration or a dependency.

- A malformed variable stops the app's creation with a `ConfigurationError` (`app.config`).
- A database or Redis that does not answer, met by any command, is explained by `explain`.
  `install` makes that the CLI's last word: an exception nobody caught reaches
  `sys.excepthook`, which prints the one line (exit status 1) for these and a traceback for
  anything else (a bug keeps its traceback). It is a hook at the process's entry rather than a
  wrapper around each command because some commands run before the app is loaded — Flask-
  Migrate's `db upgrade` is looked up by Flask's CLI before `wsgi` is imported.
- `serve` and `worker` check at start what they stand on (`check_start`): the database must
  answer at the newest migration; Redis that does not answer is warned about, once (a worker
  then waits for it); so is a default model whose key variable is unset.
"""

from __future__ import annotations

import copy
import functools
import os
import sys
import types
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit, urlunsplit

import click
from flask import Flask, current_app
from flask.cli import with_appcontext
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, DisconnectionError, InterfaceError, OperationalError

from app.misconfigured import ConfigurationError

UPGRADE_HINT = "run: flask --app wsgi db upgrade"
# Driver errors that mean "the schema is not there": MySQL/MariaDB 1146 (no such table),
# 1054 (no such column); SQLite says it in words.
MISSING_SCHEMA_CODES = (1146, 1054)


def redacted_database_url(url: str | None) -> str:
    """The URL with its password masked (`***`), for a message an operator may paste."""
    if not url:
        return "the embedded SQLite file under instance/"
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # a URL we cannot parse is not shown at all
        return "(unparseable)"


def redacted_redis_url(url: str | None) -> str:
    if not url:
        return "(unset)"
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}"
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _driver_message(exc: DBAPIError) -> str:
    """What the driver said, without SQLAlchemy's statement and links: pymysql's (code, text)
    pair gives its text."""
    args = getattr(exc.orig, "args", ())
    if len(args) == 2 and isinstance(args[0], int):
        return str(args[1])
    return str(exc.orig).splitlines()[0] if exc.orig is not None else type(exc).__name__


def _missing_schema(exc: DBAPIError) -> bool:
    args = getattr(exc.orig, "args", ())
    if args and args[0] in MISSING_SCHEMA_CODES:
        return True
    return "no such table" in str(exc.orig) or "no such column" in str(exc.orig)


def explain(exc: BaseException, *, database_url: str | None = None,
            redis_url: str | None = None) -> str | None:
    """One line for a configuration or dependency failure, naming the variable or the service;
    None for anything else."""
    if isinstance(exc, ConfigurationError):
        return str(exc)
    if isinstance(exc, DBAPIError) and _missing_schema(exc):
        return (f"the database at DATABASE_URL={redacted_database_url(database_url)} has no "
                f"schema or an older one ({_driver_message(exc)}); {UPGRADE_HINT}")
    if isinstance(exc, OperationalError | InterfaceError | DisconnectionError):
        detail = _driver_message(exc) if isinstance(exc, DBAPIError) else str(exc)
        return (f"cannot use the database at DATABASE_URL={redacted_database_url(database_url)}"
                f": {detail}")
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return (f"cannot reach Redis at REDIS_URL={redacted_redis_url(redis_url)}: "
                f"{str(exc).rstrip('.')}")
    return None


def install(env: Mapping[str, str] = os.environ) -> None:
    """From now on an uncaught configuration or dependency failure ends the process with one
    line on stderr (exit status 1) instead of a traceback."""
    previous = sys.excepthook

    def one_line(kind: type[BaseException], value: BaseException,
                 traceback: types.TracebackType | None) -> None:
        line = explain(value, database_url=env.get("DATABASE_URL") or None,
                       redis_url=env.get("REDIS_URL") or None)
        if line is None:
            previous(kind, value, traceback)
        else:
            print(f"Error: {line}", file=sys.stderr)

    sys.excepthook = one_line


def unreachable_dependencies(settings: Mapping[str, object],
                             migrations_dir: str) -> list[tuple[str, str]]:
    """`(dependency, line)` for each dependency that does not answer now — `database`, `schema`
    (behind this release's newest migration), `redis` — for the production command's start,
    which goes on (a load balancer asks `/readyz`) but says so once. Opens nothing it keeps."""
    from alembic.script import ScriptDirectory
    from sqlalchemy import create_engine, text
    from sqlalchemy.pool import NullPool

    from app import redis_connection

    problems: list[tuple[str, str]] = []
    database_url = str(settings["SQLALCHEMY_DATABASE_URI"])
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as connection:
            # Alembic's own table, read directly (its MigrationContext logs its setup).
            applied = set(connection.scalars(text("SELECT version_num FROM alembic_version")))
        if applied != set(ScriptDirectory(migrations_dir).get_heads()):
            problems.append(("schema", f"the database at DATABASE_URL="
                             f"{redacted_database_url(database_url)} is not at this release's "
                             f"newest migration; {UPGRADE_HINT}"))
    except (DBAPIError, DisconnectionError) as exc:
        dependency = ("schema" if isinstance(exc, DBAPIError) and _missing_schema(exc)
                      else "database")
        problems.append((dependency, explain(exc, database_url=database_url) or str(exc)))
    finally:
        engine.dispose()
    redis_url = settings.get("REDIS_URL")
    if redis_url:
        client = redis_connection.client(str(redis_url), socket_connect_timeout=2,
                                         socket_timeout=5)
        try:
            client.ping()
        except (RedisConnectionError, RedisTimeoutError) as exc:
            problems.append(("redis", explain(exc, redis_url=str(redis_url)) or str(exc)))
        finally:
            client.close()
    return problems


def _warn(message: str) -> None:
    click.secho(f"Warning: {message}", err=True, fg="yellow")


def check_start(app: Flask, *, needs_redis: bool, redis_required: bool = False) -> None:
    """What `serve` (needs_redis False) and `worker` check before they start: a problem that
    stops them is a `click.ClickException` (one line, exit 1), one that only limits them a
    warning, printed once. `redis_required`: Redis down stops the command too (`worker
    --burst`, which would have nothing to wait for)."""
    # Imported here: this module is loaded before the app exists (`wsgi.py`).
    from app import health
    from app.envelope import DEPENDENCY_ERRORS

    database_url = app.config["SQLALCHEMY_DATABASE_URI"]
    try:
        applied = health.applied_migrations()
    except DEPENDENCY_ERRORS as exc:
        raise click.ClickException(explain(exc, database_url=database_url) or str(exc)) \
            from None
    if applied != health.newest_migrations():
        raise click.ClickException(
            f"the database at DATABASE_URL={redacted_database_url(database_url)} is not at "
            f"this release's newest migration; {UPGRADE_HINT}")

    redis_url = app.config.get("REDIS_URL")
    if redis_url:
        try:
            app.extensions["memory_queue"].redis.ping()
        except DEPENDENCY_ERRORS as exc:
            line = explain(exc, redis_url=redis_url)
            if redis_required:
                raise click.ClickException(line or str(exc)) from None
            # Neither stops: a worker waits for Redis (and outlives its outages), the web
            # answers what needs no Redis.
            _warn(f"{line}; the worker waits and starts working when Redis answers" if needs_redis
                  else f"{line}; the completion webhook answers 503 until Redis answers")

    _warn_about_the_model()


def _warn_about_the_model() -> None:
    """The model extraction would use now (D10), when it cannot be called."""
    from app.extensions import db
    from app.extraction import llm

    try:
        model = llm.resolve_model()
    finally:
        db.session.remove()
    if model is None:
        _warn("no extraction model is registered: jobs record no_model; add one with "
              "flask --app wsgi models add NAME --model M --default")
        return
    variable = llm.api_key_env(model)
    if llm.why_unusable(model) == "llm_api_key_missing":
        _warn(f"{variable} is unset, the key variable of the extraction model "
              f"{model.name!r}: jobs are skipped as llm_api_key_missing until it is set")


def with_start_checks(command: click.Command, *, needs_redis: bool,
                      redis_required: Callable[..., bool] = lambda **_: False) -> click.Command:
    """A copy of `command` that runs `check_start` on the current app before its own work (for
    commands defined outside `app.cli`, such as `worker`; Flask's CLI pushes the app context
    of the app's commands). Without REDIS_URL a command that needs Redis says so itself.
    `redis_required(**options)`: whether, with these options, Redis down stops it."""
    original = command.callback
    assert original is not None

    @functools.wraps(original)
    @with_appcontext
    def checked(*args: object, **kwargs: object) -> object:
        # Werkzeug's documented way to the object behind a proxy; the proxy's type hides it.
        app = current_app._get_current_object()  # type: ignore[attr-defined]
        if not needs_redis or app.config.get("REDIS_URL"):
            check_start(app, needs_redis=needs_redis, redis_required=redis_required(**kwargs))
        return original(*args, **kwargs)

    checked_command = copy.copy(command)
    checked_command.callback = checked
    return checked_command
