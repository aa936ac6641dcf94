"""Configuration and dependency problems answer in one line naming the variable or the service
(exit status ≠ 0, no traceback), from every command of the real CLI and at the server's start;
`serve` and `worker` warn once about what only limits them (issue 25)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from app.extensions import db
from app.startup import explain
from app.system import service as system
from tests.conftest import TEST_DATABASE_URL, TEST_REDIS_URL
from tests.serving import ROOT, gunicorn, process_env, serve
from tests.workers import wait_until

CLOSED_DATABASE = "mysql+pymysql://memory:s3cret@127.0.0.1:1/memory?charset=utf8mb4"
CLOSED_REDIS = "redis://127.0.0.1:1/0"
# Every command an operator runs, as `flask --app wsgi …` takes it (each must stop at the
# problem, before it would do anything).
COMMANDS = [
    ["users", "--help"],
    ["users", "grant", "someone", "memory:read"],
    ["users", "tokens", "someone"],
    ["models", "list"],
    ["db", "upgrade"],
    ["serve", "--port", "1"],
    ["worker", "--burst"],
]


def flask(*args: str, timeout_s: float = 60, **env: str) -> subprocess.CompletedProcess:
    """`flask --app wsgi ARGS` in the checkout, with the test database unless `env` says."""
    return subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", *args], cwd=ROOT,
                          env=process_env(**env), capture_output=True, text=True,
                          timeout=timeout_s)


def assert_one_line(result: subprocess.CompletedProcess, *names: str) -> str:
    """Exit ≠ 0, stderr one `Error:` line naming each of `names`, no traceback."""
    assert result.returncode != 0, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    for name in names:
        assert name in lines[0], lines[0]
    assert "Traceback" not in result.stdout + result.stderr
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_an_unparseable_database_url_is_one_line_for_every_command(command):
    assert_one_line(flask(*command, DATABASE_URL="not a url"), "DATABASE_URL")


def test_a_database_url_of_an_unknown_kind_is_one_line_naming_it():
    assert_one_line(flask("users", "--help", DATABASE_URL="nosuchdb://host/db"), "DATABASE_URL")


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != ["users", "--help"]],
                         ids=" ".join)
def test_a_database_that_does_not_answer_is_one_line_naming_it(command):
    line = assert_one_line(flask(*command, DATABASE_URL=CLOSED_DATABASE,
                                 REDIS_URL=TEST_REDIS_URL), "DATABASE_URL", "127.0.0.1:1")
    assert "s3cret" not in line


def test_users_help_works_while_the_database_does_not_answer():
    result = flask("users", "--help", DATABASE_URL=CLOSED_DATABASE)
    assert result.returncode == 0 and "create" in result.stdout, result.stderr


def test_worker_with_redis_on_a_closed_port_warns_once_and_waits(app, tmp_path):
    """A worker outlives Redis outages (SPEC §9), the one at its start too: one line naming
    REDIS_URL, no traceback, and it keeps waiting — alive after its third try."""
    log = tmp_path / "worker.log"
    with log.open("w") as output:
        worker = subprocess.Popen([sys.executable, "-m", "flask", "--app", "wsgi", "worker"],
                                  cwd=ROOT, env=process_env(REDIS_URL=CLOSED_REDIS),
                                  stdout=subprocess.DEVNULL, stderr=output, text=True)
    try:
        wait_until(lambda: log.read_text().count("event=worker.redis_unavailable") >= 3, 30,
                   "the worker's third try")
        assert worker.poll() is None, "the worker gave up"
    finally:
        worker.terminate()
        worker.wait(timeout=30)
    stderr = log.read_text()
    named = [line for line in stderr.splitlines() if "REDIS_URL" in line]
    assert len(named) == 1 and "127.0.0.1:1" in named[0], stderr
    assert "Traceback" not in stderr


@pytest.mark.parametrize(("variable", "value"), [("MEMORY_LLM_TIMEOUT_S", "soon"),
                                                 ("REDIS_URL", "http://127.0.0.1:6379")])
def test_a_malformed_variable_is_one_line_that_starts_with_its_name(variable, value):
    line = assert_one_line(flask("users", "--help", **{variable: value}), variable)
    assert line.startswith(f"Error: {variable}")


def test_production_without_secret_key_is_one_line_naming_it():
    assert_one_line(flask("models", "list", APP_ENV="production"), "SECRET_KEY")


def test_serve_on_an_unmigrated_database_is_one_line_saying_db_upgrade(tmp_path):
    result = flask("serve", "--port", "1", DATABASE_URL=f"sqlite:///{tmp_path}/empty.sqlite3",
                   MEMORY_SERVICE_TOKEN="t", MEMORY_WEBHOOK_SECRET="s")
    assert_one_line(result, "DATABASE_URL", "db upgrade")


def test_a_command_on_an_unmigrated_database_is_one_line_saying_db_upgrade(tmp_path):
    result = flask("users", "grant", "someone", "memory:read",
                   DATABASE_URL=f"sqlite:///{tmp_path}/empty.sqlite3")
    assert_one_line(result, "DATABASE_URL", "db upgrade")


@pytest.fixture
def model_without_key(app, monkeypatch):
    """The default model names a key variable that is unset."""
    monkeypatch.delenv("MISSING_TEST_API_KEY", raising=False)
    with app.app_context():
        system.add_model("keyless", "gpt-x", api_key_env="MISSING_TEST_API_KEY", default=True)
        db.session.remove()


def test_serve_warns_once_about_redis_down_and_the_model_key_unset(model_without_key,
                                                                    tmp_path):
    with serve(tmp_path / "instance", tmp_path, REDIS_URL=CLOSED_REDIS,
               MEMORY_SERVICE_TOKEN="t", MEMORY_WEBHOOK_SECRET="s") as served:
        warnings = [line for line in served.log().splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 2, served.log()
    assert "REDIS_URL" in warnings[0] and "503" in warnings[0]
    assert "MISSING_TEST_API_KEY is unset" in warnings[1] and "'keyless'" in warnings[1]


def test_worker_warns_once_about_the_model_key_unset(model_without_key):
    result = flask("worker", "--burst", REDIS_URL=TEST_REDIS_URL,
                   DATABASE_URL=TEST_DATABASE_URL)
    assert result.returncode == 0, result.stderr
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1 and "MISSING_TEST_API_KEY is unset" in warnings[0], result.stderr


def test_models_list_says_whether_each_key_variable_is_set(app, runner, monkeypatch):
    monkeypatch.setenv("PRESENT_TEST_API_KEY", "k")
    monkeypatch.delenv("MISSING_TEST_API_KEY", raising=False)
    with app.app_context():
        system.add_model("ready", "gpt-a", api_key_env="PRESENT_TEST_API_KEY", default=True)
        system.add_model("keyless", "gpt-b", api_key_env="MISSING_TEST_API_KEY")
        db.session.remove()
    listing = runner.invoke(args=["models", "list"]).output.splitlines()
    ready = next(line for line in listing if "\tready\t" in line)
    keyless = next(line for line in listing if "\tkeyless\t" in line)
    assert ready.endswith("\tPRESENT_TEST_API_KEY set")
    assert keyless.endswith("\tMISSING_TEST_API_KEY unset")


def test_a_bug_keeps_its_traceback():
    assert explain(ValueError("a bug")) is None


@pytest.mark.parametrize(("dependency", "env"), [
    ("database", {"DATABASE_URL": CLOSED_DATABASE}),
    ("redis", {"REDIS_URL": CLOSED_REDIS}),
], ids=["database", "redis"])
def test_gunicorn_logs_one_line_naming_each_dependency_that_does_not_answer(
        dependency, env, tmp_path):
    """The production command starts anyway (`/readyz` says 503 until it answers)."""
    with gunicorn(tmp_path, "gunicorn", **env) as served:
        pass
    lines = [line for line in served.log().splitlines()
             if "event=startup.dependency_unreachable" in line]
    assert len(lines) == 1, served.log()
    assert f" dependency={dependency} " in lines[0]
    assert ("DATABASE_URL" if dependency == "database" else "REDIS_URL") in lines[0]
    assert "s3cret" not in served.log()


def test_gunicorn_logs_a_schema_behind_the_release(tmp_path):
    with gunicorn(tmp_path, "gunicorn",
                  DATABASE_URL=f"sqlite:///{tmp_path}/empty.sqlite3") as served:
        pass
    (line,) = [line for line in served.log().splitlines()
               if "event=startup.dependency_unreachable" in line]
    assert " dependency=schema " in line and "db upgrade" in line


def test_gunicorn_keeps_its_control_socket_in_the_installations_instance_folder(tmp_path):
    """Not the one per user that every installation on the host would share."""
    with gunicorn(tmp_path, "gunicorn") as served:
        pass
    assert f"Control socket listening at {ROOT / 'instance' / 'gunicorn.ctl'}" in served.log()


def test_serve_on_a_port_in_use_is_one_line_before_any_banner(app, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = flask("serve", "--port", str(port))
    line = assert_one_line(result, f"127.0.0.1:{port}", "--port")
    assert result.stdout == "", "no banner, no credentials"
    assert "in use" in line


def test_an_unknown_app_env_is_one_line_naming_it():
    line = assert_one_line(flask("users", "--help", APP_ENV="prod"), "APP_ENV")
    assert "'prod'" in line and "production" in line


def test_flask_run_without_a_service_token_answers_401_saying_to_use_serve(make_app):
    client = make_app(MEMORY_SERVICE_TOKEN=None).test_client()
    answer = client.get("/api/v1/internal/memory/context?userId=1",
                        headers={"Authorization": "Bearer guessed"})
    assert answer.status_code == 401
    assert "MEMORY_SERVICE_TOKEN is unset" in answer.json["message"]
    assert "flask --app wsgi serve" in answer.json["message"]
