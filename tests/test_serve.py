"""`flask --app wsgi serve`, the embedded setup's server, started for real: platform secrets
generated once outside production, and job events in its log as in the worker's."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import urllib.error
import urllib.request

from app.platform import client, credentials
from tests.completions import USER_ID, capture_on, event
from tests.conftest import SERVICE_TOKEN, WEBHOOK_SECRET
from tests.serving import serve
from tests.workers import wait_until

CONTEXT = "/api/v1/internal/memory/context?userId=1&projectKey=mao"


def _context_status(url: str, token: str) -> int:
    request = urllib.request.Request(url + CONTEXT, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _webhook_status(url: str, secret: str) -> int:
    return client.deliver(url, secret, event(userId=1)).status


def test_serve_generates_platform_secrets_once_into_instance(app, tmp_path):
    instance = tmp_path / "instance"
    with serve(instance, tmp_path, "first") as first:
        path = instance / credentials.FILE_NAME
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        generated = credentials.read(str(instance))
        printed = first.output()
        assert f"generated into {path}" in printed
        for name, value in generated.items():
            assert f"  {name}={value}\n" in printed
        assert _context_status(first.url, generated["MEMORY_SERVICE_TOKEN"]) == 200
        assert _webhook_status(first.url, generated["MEMORY_WEBHOOK_SECRET"]) == 202
    kept = path.read_bytes()

    with serve(instance, tmp_path, "second") as second:
        assert f"reused from {path}" in second.output()
        assert _context_status(second.url, generated["MEMORY_SERVICE_TOKEN"]) == 200
    assert path.read_bytes() == kept


def test_serve_prints_a_ready_platform_example(app, tmp_path):
    """The banner's curl line, run as printed, reads the context with the generated token."""
    with serve(tmp_path / "instance", tmp_path) as served:
        lines = served.output().splitlines()
        curl = next(line.strip() for line in lines if line.strip().startswith("curl "))
        answer = subprocess.run(["bash", "-c", curl], capture_output=True, text=True,
                                timeout=30, check=True).stdout
        assert json.loads(answer)["data"] == {"memories": [], "prompt": ""}
        complete = next(line.strip() for line in lines if " platform complete 1 " in line)
        assert f"--url {served.url} " in complete


def test_serve_keeps_platform_secrets_set_in_the_environment(app, tmp_path):
    instance = tmp_path / "instance"
    with serve(instance, tmp_path, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN,
               MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET) as served:
        assert "Platform credentials" not in served.output()
        assert _context_status(served.url, SERVICE_TOKEN) == 200
    assert not (instance / credentials.FILE_NAME).exists()


def test_serve_in_production_generates_no_platform_secrets(app, tmp_path):
    instance = tmp_path / "instance"
    with serve(instance, tmp_path, APP_ENV="production",
               SECRET_KEY="a-real-production-key") as served:
        assert _context_status(served.url, "guessed") == 401
        assert _webhook_status(served.url, "guessed") == 503
        log = served.log()
    assert not (instance / credentials.FILE_NAME).exists()
    for name in ("MEMORY_SERVICE_TOKEN", "MEMORY_WEBHOOK_SECRET"):
        assert f"event=config.platform_secret_missing variable={name}" in log


def test_serve_logs_job_events_at_info_as_the_worker_does(app, llm, tmp_path):
    capture_on(app)
    llm.reply_items([])
    with serve(tmp_path / "instance", tmp_path, MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET) as served:
        body = event()
        assert client.deliver(served.url, WEBHOOK_SECRET, body).status == 202
        finished = re.compile(
            r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z INFO app\.extraction\.outcomes "
            rf"event=job\.finished kind=extraction job=extract-\w+ event_id={body['eventId']} "
            rf"user={USER_ID} .*status=succeeded reason=nothing_to_remember .*"
            # The embedded queue runs the job in the delivery's context: its request id.
            r" request_id=[0-9a-f]{32}$", re.MULTILINE)
        wait_until(lambda: finished.search(served.log()), 30, "the job's log line")
