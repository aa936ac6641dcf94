"""Operator commands (SPEC §7): `flask --app wsgi users|models|memories|platform|serve …`
(`worker` is added by `jobs`)."""

from __future__ import annotations

import json
import logging
import os
import secrets
import shlex
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import click
from flask import Flask, current_app
from flask.cli import AppGroup
from werkzeug.serving import WSGIRequestHandler, make_server

from app import config as app_config
from app import logs, metrics, startup
from app.auth import service as accounts
from app.extraction.llm import DEFAULT_KEY_ENV
from app.memory import stored_secrets
from app.memory.rules import ID_MAX
from app.platform import client, credentials
from app.retention import prune_command
from app.system import service as system

http_log = logging.getLogger("werkzeug")

users = AppGroup("users", help="Manage accounts, grants and personal API tokens.")
models = AppGroup("models", help="Register the LLM models extraction may use.")
platform = AppGroup("platform", help="Act as the agent platform against a running service.")
memories = AppGroup("memories", help="Look into the stored memories of every user.")

# An example task long enough for extraction (D11 skips user messages under 20 characters).
EXAMPLE_USER_MESSAGE = "以后报告都用中文写,我们这个仓库统一用 pnpm 管理依赖"
EXAMPLE_ANSWER = "好的,报告已用中文写好,依赖也改用 pnpm 安装了。"


@contextmanager
def _account_refusals() -> Iterator[None]:
    """What the account service refuses, as a one-line CLI error (exit 1), never a traceback."""
    try:
        yield
    except accounts.AccountError as exc:
        raise click.ClickException(str(exc)) from None


def log_to_stderr() -> None:
    """Job events at INFO, in the one format (`app.logs`): the same for `worker` and `serve`."""
    logs.configure(logging.INFO)


@users.command("create")
@click.argument("name")
@click.option("--id", "user_id", type=click.IntRange(1, ID_MAX),
              help="The platform's user id (names an existing platform user).")
@click.option("--password", help="Password for the login page, at least "
                                 f"{accounts.PASSWORD_MIN_LENGTH} characters.")
@click.option("--no-password", is_flag=True,
              help="A token-only account: no login page, personal tokens only.")
@click.option("--admin", is_flag=True, help="Make the user an admin.")
def create_user(name: str, user_id: int | None, password: str | None, no_password: bool,
                admin: bool) -> None:
    """Create the account NAME, with --password P or, token-only, --no-password."""
    # A token-only account is asked for by name: an empty or forgotten --password must not make
    # one silently.
    if no_password == (password is not None):
        raise click.UsageError("give either --password P or --no-password (token-only)")
    with _account_refusals():
        user = accounts.create_user(name, user_id=user_id, password=password, admin=admin)
    role = "admin" if user.is_admin else "user"
    click.echo(f"created {role} {user.username} (id {user.id})")


@users.command("grant")
@click.argument("name")
@click.argument("code")
def grant(name: str, code: str) -> None:
    """Grant the permission CODE (e.g. memory:read) to NAME."""
    with _account_refusals():
        accounts.grant(name, code)
    click.echo(f"granted {code} to {name}")


@users.command("token")
@click.argument("name")
@click.option("--days", type=click.IntRange(1, 3650),
              help="Expire the token after N days (default: valid until revoked).")
def token(name: str, days: int | None) -> None:
    """Print a new personal API token for NAME (alone on the last line)."""
    from app.auth.models import User

    user = User.by_username(name)
    if user is None:
        raise click.ClickException(f"no user {name!r}")
    until = f", valid for {days} days" if days else ""
    click.echo(f"new personal token for {name}{until}; it is shown once:")
    click.echo(accounts.issue_token(user, days=days))


def _when(value: datetime | None, none: str = "-") -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") + " UTC" if value else none


@users.command("tokens")
@click.argument("name")
def list_tokens(name: str) -> None:
    """List NAME's personal tokens: id, prefix, created, last used, expiry."""
    with _account_refusals():
        rows = accounts.tokens(name)
    if not rows:
        click.echo(f"{name} has no personal tokens")
        return
    click.echo("id\tprefix\tcreated\tlast used\texpires")
    for row in rows:
        click.echo(f"{row.id}\t{row.prefix or '-'}\t{_when(row.created_at)}"
                   f"\t{_when(row.last_used_at, 'never')}\t{_when(row.expires_at, 'never')}")


@users.command("revoke-token")
@click.argument("name")
@click.argument("token_id", metavar="ID", type=int)
def revoke_token(name: str, token_id: int) -> None:
    """Revoke NAME's token ID (see `users tokens`): its next call is 401."""
    with _account_refusals():
        accounts.revoke_token(name, token_id)
    click.echo(f"revoked token {token_id} of {name}")


@users.command("password")
@click.argument("name")
@click.password_option(help="The new password (asked for when not given).")
def password(name: str, password: str) -> None:
    """Set NAME's password; every login of NAME ends."""
    with _account_refusals():
        ended = accounts.set_password(name, password)
    click.echo(f"password of {name} changed; {ended} login(s) ended")


@users.command("disable")
@click.argument("name")
def disable(name: str) -> None:
    """Disable NAME: every login ends, no new login, personal tokens refused."""
    with _account_refusals():
        ended = accounts.set_disabled(name, True)
    click.echo(f"disabled {name}; {ended} login(s) ended")


@users.command("enable")
@click.argument("name")
def enable(name: str) -> None:
    """Enable NAME again (its tokens work again; logins must be made anew)."""
    with _account_refusals():
        accounts.set_disabled(name, False)
    click.echo(f"enabled {name}")


@models.command("add")
@click.argument("name")
@click.option("--model", "model_name", required=True, help="The provider's model name.")
@click.option("--base-url", help="OpenAI-compatible endpoint, an http(s) URL (not a "
                                 "link-local or cloud metadata address, in any spelling); "
                                 "default OPENAI_BASE_URL.")
@click.option("--api-key-env", help="Name of the env var holding the key, of the form "
                                    "[A-Z][A-Z0-9_]*_API_KEY; default OPENAI_API_KEY. Never "
                                    "one of the service's own secrets (SECRET_KEY, "
                                    "MEMORY_SERVICE_TOKEN, MEMORY_WEBHOOK_SECRET, any "
                                    "MEMORY_*/FLASK_* variable): the key is sent to the base "
                                    "URL.")
@click.option("--default", "is_default", is_flag=True, help="Make it the default model.")
def add_model(name: str, model_name: str, base_url: str | None, api_key_env: str | None,
              is_default: bool) -> None:
    """Register the model NAME."""
    try:
        row = system.add_model(name, model_name, base_url=base_url, api_key_env=api_key_env,
                               default=is_default)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"added model {row.name} (id {row.id}){' [default]' if row.is_default else ''}")


@models.command("list")
def list_models() -> None:
    """List registered models, and whether each one's key variable is set in this
    environment (a model whose key is unset cannot be called: jobs record llm_api_key_missing).
    """
    rows = system.list_models()
    if not rows:
        click.echo("no models registered; add one with: flask --app wsgi models add NAME "
                   "--model M --default")
        return
    click.echo("id\tname\tmodel\tbase url\tkey variable\tkey")
    for row in rows:
        flag = " [default]" if row.is_default else ""
        variable = row.api_key_env or DEFAULT_KEY_ENV
        state = "set" if os.environ.get(variable) else "unset"
        click.echo(f"{row.id}\t{row.name}\t{row.model}\t{row.base_url or '-'}"
                   f"\t{row.api_key_env or '-'}{flag}\t{variable} {state}")


@platform.command("complete")
@click.argument("user_id", type=click.IntRange(1, ID_MAX))
@click.option("--project", "project_key", help="The session's projectKey (none: no project).")
@click.option("--user-message", required=True, help="The task's last user message.")
@click.option("--answer", required=True, help="The task's final assistant answer.")
@click.option("--session-id", type=click.IntRange(1, ID_MAX),
              help="The platform session (default: a new one).")
@click.option("--event-id", help="Unique per completion (default: a new one); repeat one to "
                                 "see duplicate_event.")
@click.option("--url", default="http://127.0.0.1:5000", show_default=True,
              help="The running service.")
@click.option("--phase", default="COMPLETED", show_default=True,
              help="COMPLETED, FAILED, CANCELLED…; only COMPLETED is learnt from.")
@click.option("--session-type", default="NORMAL", show_default=True,
              help="NORMAL, SUBAGENT, SIDE_TASK…; subagents and side tasks are not learnt from.")
@click.option("--wait", is_flag=True,
              help="When a job was enqueued, wait for its outcome (read from the database) and "
                   "print it; exits 1 unless it succeeded or was skipped.")
@click.option("--wait-timeout", default=120, show_default=True, type=click.IntRange(1, 3600),
              help="Seconds --wait waits.")
def complete(user_id: int, project_key: str | None, user_message: str, answer: str,
             session_id: int | None, event_id: str | None, url: str, phase: str,
             session_type: str, wait: bool, wait_timeout: int) -> None:
    """Send a signed completion event for USER_ID, as a platform does when a task ends.

    Signs with MEMORY_WEBHOOK_SECRET, or outside production with the secret `serve` generated
    into instance/. Prints the HTTP status and the service's answer; exits 1 unless it is 2xx.
    The job runs after the answer (seconds, with a model): --wait waits for its outcome.
    """
    secret = _webhook_secret()
    event = {
        "eventId": event_id or f"cli-{secrets.token_hex(8)}",
        "sessionId": session_id or secrets.randbelow(2**31 - 1) + 1,
        "userId": user_id, "projectKey": project_key, "workspace": None,
        "sessionType": session_type, "channel": "WEB", "phase": phase,
        "lastUserMessage": user_message, "lastAssistantMessage": answer,
    }
    click.echo(f"POST {url.rstrip('/')}{client.WEBHOOK_PATH} eventId={event['eventId']} "
               f"sessionId={event['sessionId']} userId={user_id}")
    try:
        reply = client.deliver(url, secret, event)
    except client.Unreachable as exc:
        raise click.ClickException(f"no answer from {exc}") from None
    click.echo(f"HTTP {reply.status}")
    click.echo(reply.body.rstrip("\n"))
    if not 200 <= reply.status < 300:
        raise click.exceptions.Exit(1)
    if wait and (json.loads(reply.body).get("data") or {}).get("enqueued"):
        _wait_for_outcome(event["eventId"], wait_timeout)


def _wait_for_outcome(event_id: str, timeout_s: int) -> None:
    """The extraction outcome of `event_id`, printed once the job has recorded it."""
    from app.extensions import db
    from app.extraction.models import JobOutcome
    from app.extraction.outcomes import JobKindName, OutcomeStatus

    deadline = time.monotonic() + timeout_s
    query = db.select(JobOutcome).where(JobOutcome.event_id == event_id,
                                        JobOutcome.kind == JobKindName.EXTRACTION)
    while (outcome := db.session.scalar(query)) is None:
        db.session.remove()
        if time.monotonic() > deadline:
            raise click.ClickException(f"no outcome for eventId={event_id} after {timeout_s} s "
                                       "(is a worker running? see its log)")
        time.sleep(0.2)
    db.session.remove()
    click.echo(f"outcome: status={outcome.status} reason={outcome.reason} "
               f"inserted={outcome.inserted} touched={outcome.touched} "
               f"updated={outcome.updated} model={outcome.model or '-'}")
    if outcome.status not in (OutcomeStatus.SUCCEEDED, OutcomeStatus.SKIPPED):
        raise click.exceptions.Exit(1)


def _webhook_secret() -> str:
    """The configured secret; outside production, else the one `serve` keeps in instance/."""
    secret = current_app.config.get("MEMORY_WEBHOOK_SECRET")
    if not secret and not app_config.is_production():
        try:
            secret = credentials.read(current_app.instance_path).get("MEMORY_WEBHOOK_SECRET")
        except credentials.CredentialsFileError as exc:
            raise click.ClickException(str(exc)) from None
    if not secret:
        raise click.ClickException(
            "MEMORY_WEBHOOK_SECRET is unset (and `serve` has generated none into "
            f"{credentials.file_path(current_app.instance_path)}): set it to the service's secret")
    return secret


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=5000, show_default=True, type=int)
def serve(host: str, port: int) -> None:
    """Run the service on its built-in server (the embedded setup; use gunicorn in production).

    Outside production, platform secrets left unset are generated once into instance/ and
    reused on later starts, so the platform endpoints answer from the first start.
    """
    from app.auth.models import User
    from app.extensions import db

    # The port first: a port in use is one line, before any banner (which shows credentials).
    _check_port(host, port)
    app = current_app._get_current_object()
    # The database must answer at the newest migration; Redis down and an unset model key are
    # said once here, not discovered later from 503s and skipped jobs.
    startup.check_start(app, needs_redis=False)
    # `serve` starts the installation: earlier runs' metric files go (multiprocess mode).
    metrics.clean_stale_files()
    with app.app_context():
        has_users = db.session.scalar(db.select(db.func.count()).select_from(User)) > 0
        db.session.remove()
    filled = None
    if not app_config.is_production():
        try:
            filled = credentials.fill_unset(app)
        except credentials.CredentialsFileError as exc:
            raise click.ClickException(str(exc)) from None
    base = f"http://{host}:{port}"
    click.echo(f"Memory service: log in at {base}/login (API docs: {base}/api/openapi.json)")
    if not has_users:
        click.echo("No users yet. In another terminal, create the first one:\n"
                   "  .venv/bin/flask --app wsgi users create admin --password 'choose-one' "
                   "--admin")
    if filled is not None:
        click.echo(_platform_banner(app, base, filled))
    # The in-process jobs log what they did, as the worker's do.
    log_to_stderr()
    # Flask refuses app.run() inside a CLI command; run werkzeug's server directly.
    server = make_server(host, port, app, threaded=True, request_handler=RequestLine)
    http_log.info("event=serve.listening url=%s server=werkzeug note=%s", base,
                  logs.quoted("the embedded setup's server; use gunicorn in production"))
    server.serve_forever()


def _check_port(host: str, port: int) -> None:
    probe = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    # As the server will bind: a port left in TIME_WAIT by an earlier run is free.
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind((host, port))
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: "
                                   f"{exc.strerror or exc}; choose another with --port") from None
    finally:
        probe.close()


class RequestLine(WSGIRequestHandler):
    """werkzeug's line for each request, in the one log format (`app.logs`)."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        environ = getattr(self, "environ", None) or {}
        http_log.info("event=http.request remote=%s method=%s path=%s status=%s bytes=%s "
                      "request_id=%s", self.address_string(), getattr(self, "command", "-"),
                      logs.quoted(getattr(self, "path", self.requestline)), code, size,
                      environ.get(logs.ENVIRON_KEY, "-"))


def _platform_banner(app: Flask, base: str, filled: credentials.Filled) -> str:
    """The platform credentials in effect and a copy-paste example of both platform calls."""
    source = "generated into" if filled.created else "reused from"
    token = app.config["MEMORY_SERVICE_TOKEN"]
    context_url = f"{base}/api/v1/internal/memory/context?userId=1&projectKey=mao"
    example = ["platform", "complete", "1", "--project", "mao", "--url", base,
               "--user-message", EXAMPLE_USER_MESSAGE, "--answer", EXAMPLE_ANSWER]
    return "\n".join([
        f"Platform credentials ({source} {filled.path}, kept for later starts; set them in the "
        "environment to choose your own):",
        *(f"  {name}={app.config[name]}{'' if name in filled.names else '  (environment)'}"
          for name in app_config.PLATFORM_SECRETS),
        "Try the platform side from another terminal (user 1, project mao):",
        f"  curl -s {shlex.quote(context_url)} -H {shlex.quote(f'Authorization: Bearer {token}')}",
        f"  .venv/bin/flask --app wsgi {shlex.join(example)}",
    ])


@memories.command("find-secrets")
@click.option("--batch", type=click.IntRange(1, 1_000_000), default=stored_secrets.BATCH,
              show_default=True, help="Rows fetched per round trip.")
def find_secrets(batch: int) -> None:
    """List stored memories that hold a credential, as new writes are refused now (SPEC §11):
    one line per row on stdout, `id<TAB>user<TAB>kind<TAB>kind in words`, then a count on
    stderr. Read-only: it changes nothing (docs/operations.md says what to do with them)."""
    scan = stored_secrets.Scan()
    for found in stored_secrets.find(scan, batch):
        click.echo(f"{found.id}\t{found.user_id}\t{found.kind.value}\t{found.kind.words}")
    click.echo(f"scanned {scan.rows} memories in {scan.seconds:.1f} s: {scan.found} hold a "
               "credential", err=True)


def register_cli(app: Flask) -> None:
    app.cli.add_command(users)
    app.cli.add_command(models)
    app.cli.add_command(memories)
    app.cli.add_command(platform)
    app.cli.add_command(serve)
    app.cli.add_command(prune_command)
