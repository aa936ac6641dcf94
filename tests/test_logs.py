"""One log format in every process, with the request id on every line of a request and of the
job it enqueued (SPEC §11 "Tracing and logs"): read from the real output of gunicorn, a worker
and its work horse, `serve` and a command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
import uuid

import pytest

from app.platform import client
from tests.completions import capture_on, event, only_outcome
from tests.conftest import SERVICE_TOKEN, TEST_REDIS_URL, WEBHOOK_SECRET
from tests.serving import ROOT, gunicorn, process_env, serve
from tests.workers import worker_processes

TEXT_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
                       r"(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+ event=[\w.]+( |$)")
CONTEXT = "/api/v1/internal/memory/context?userId=1"


def text_lines(output: str) -> list[str]:
    """Every line of a text log, each checked against the format."""
    lines = output.splitlines()
    for line in lines:
        assert TEXT_LINE.match(line), f"not in the log format: {line!r}"
    return lines


def json_lines(output: str) -> list[dict]:
    """Every line of a JSON log, each one object with the format's fields."""
    entries = [json.loads(line) for line in output.splitlines()]
    for entry in entries:
        assert {"time", "level", "logger", "event"} <= entry.keys(), entry
    return entries


def deliver(url: str, request_id: str) -> urllib.request.addinfourl:
    """A signed delivery of a completion worth extracting, sent with `X-Request-Id`."""
    raw = json.dumps(event(), ensure_ascii=False).encode()
    request = urllib.request.Request(url + client.WEBHOOK_PATH, data=raw, method="POST",
                                     headers={"Content-Type": "application/json",
                                              "X-Request-Id": request_id,
                                              **_signed(raw)})
    return urllib.request.urlopen(request, timeout=30)


def _signed(raw: bytes) -> dict[str, str]:
    from tests.completions import signed_headers

    return signed_headers(raw, WEBHOOK_SECRET)


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_gunicorn_a_worker_and_its_horse_log_one_format_with_the_webhooks_request_id(
        fmt, app, llm, tmp_path):
    capture_on(app)
    llm.reply_items([{"type": "user", "content": "输出报告用中文"}])
    request_id = f"platform-{uuid.uuid4().hex[:12]}"
    env = {"MEMORY_LOG_FORMAT": fmt, "REDIS_URL": TEST_REDIS_URL,
           "MEMORY_WEBHOOK_SECRET": WEBHOOK_SECRET,
           # The access line, as the operator's guide starts gunicorn.
           "GUNICORN_CMD_ARGS": "--access-logfile -"}
    with gunicorn(tmp_path, "gunicorn", **env) as served:
        with deliver(served.url, request_id) as response:
            assert response.status == 202
            assert response.headers["X-Request-Id"] == request_id
            assert json.loads(response.read())["data"]["reason"] == "enqueued"
    with worker_processes(1, tmp_path, burst=True, MEMORY_LOG_FORMAT=fmt) as (worker,):
        assert worker.wait(timeout=60) == 0
    web, jobs = served.log(), (tmp_path / "worker-0.log").read_text()
    assert only_outcome(app)["status"] == "succeeded", web + jobs

    if fmt == "json":
        web_entries, job_entries = json_lines(web), json_lines(jobs)
        access = [e for e in web_entries
                  if e["event"] == "http.request" and e["path"] == client.WEBHOOK_PATH]
        assert [e["request_id"] for e in access] == [request_id]
        outcome = [e for e in job_entries if e["event"] == "job.finished"]
        assert [e.get("request_id") for e in outcome] == [request_id], job_entries
        return
    text_lines(web)
    (access,) = [line for line in web.splitlines()
                 if 'event=http.request' in line and f'path="{client.WEBHOOK_PATH}"' in line]
    assert " status=202 " in access
    assert access.endswith(f" request_id={request_id}")
    # The job's lines: the horse's (its outcome, RQ's `Job OK`) and the worker's.
    of_the_job = [line for line in text_lines(jobs) if f"request_id={request_id}" in line]
    assert any("event=job.finished" in line for line in of_the_job), jobs
    assert any("Job OK" in line for line in of_the_job), jobs
    # The warm-up call before the fork never left the process: no line says it did.
    assert "warm-up.invalid" not in jobs


def test_each_response_echoes_the_request_id_sent_or_a_new_one(app, client):
    """On Flask's paths and on the two hot paths, which bypass Flask."""
    headers = {"Authorization": f"Bearer {SERVICE_TOKEN}"}
    for path in ("/healthz", CONTEXT, client_webhook_path()):
        sent = client.get(path, headers={**headers, "X-Request-Id": "req-42"})
        assert sent.headers["X-Request-Id"] == "req-42", path
        made = client.get(path, headers=headers).headers["X-Request-Id"]
        assert re.fullmatch(r"[0-9a-f]{32}", made), path


def client_webhook_path() -> str:
    return client.WEBHOOK_PATH


def test_a_request_id_that_could_forge_a_log_line_is_replaced(app, client):
    answered = client.get("/healthz", headers={"X-Request-Id": "x request_id=forged"})
    assert re.fullmatch(r"[0-9a-f]{32}", answered.headers["X-Request-Id"])


def test_serve_logs_its_requests_in_the_one_format(app, tmp_path):
    with serve(tmp_path / "instance", tmp_path, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN,
               MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET) as served:
        request = urllib.request.Request(served.url + CONTEXT, headers={
            "Authorization": f"Bearer {SERVICE_TOKEN}", "X-Request-Id": "serve-1"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["X-Request-Id"] == "serve-1"
    # `serve`'s warnings at start are messages to the operator (`Warning: …`), then its log.
    logged = [line for line in served.log().splitlines() if not line.startswith("Warning: ")]
    text_lines("\n".join(logged))
    assert any("event=http.request" in line and line.endswith(" request_id=serve-1")
               for line in logged), served.log()


def test_a_command_logs_in_the_one_format(app):
    """`db upgrade` (alembic's lines), as any command."""
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "db", "upgrade"],
                            cwd=ROOT, env=process_env(), capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert text_lines(result.stderr), "alembic says what it did"


def test_an_unknown_log_format_is_one_line_naming_the_variable():
    result = subprocess.run([sys.executable, "-m", "flask", "--app", "wsgi", "users", "--help"],
                            cwd=ROOT, env=process_env(MEMORY_LOG_FORMAT="xml"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: MEMORY_LOG_FORMAT must be one of text, json, not 'xml'"]
