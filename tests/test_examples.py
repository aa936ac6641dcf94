"""The integrator's TypeScript examples (examples/typescript, Node 20, no framework) run as
written against a live server: the context read, and the webhook signed by npm
`standardwebhooks` and by hand with node:crypto."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from tests.completions import capture_on
from tests.conftest import SERVICE_TOKEN
from tests.serving import ROOT, free_port, serve

EXAMPLES = ROOT / "examples" / "typescript"
USER_ID = 31
# A secret as Standard Webhooks libraries generate it (the hand-signed example uses it too, as
# its UTF-8 bytes, like the service).
SECRET = "whsec_" + base64.b64encode(b"examples-test-key-0123456789abcd").decode()
NODE = shutil.which("node")

pytestmark = pytest.mark.skipif(
    NODE is None, reason="node is not installed: the TypeScript examples in examples/typescript "
                         "were not run (install Node 20 to run them)")


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """The examples' one dependency (npm `standardwebhooks`), installed from the lock file."""
    installed = EXAMPLES / "node_modules" / "standardwebhooks"
    if not installed.exists():
        npm = shutil.which("npm")
        if npm is None:
            pytest.skip("npm is not installed: cannot install examples/typescript's dependency")
        result = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=EXAMPLES,
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            pytest.skip(f"npm ci failed in examples/typescript: {result.stderr[-500:]}")
    return installed


@pytest.fixture
def served(app, tmp_path):
    with serve(tmp_path / "instance", tmp_path, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN,
               MEMORY_WEBHOOK_SECRET=SECRET) as running:
        yield running


def node(script: str, url: str, **env: str) -> tuple[int, list[str]]:
    """Run an example; its exit status and output lines (status, then body)."""
    result = subprocess.run(
        [NODE, script], cwd=EXAMPLES, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "MEMORY_URL": url, "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN,
             "MEMORY_WEBHOOK_SECRET": SECRET, "USER_ID": str(USER_ID), "PROJECT_KEY": "mao",
             **env})
    assert not result.stderr, result.stderr
    return result.returncode, result.stdout.splitlines()


def test_the_context_read_example_prints_status_then_the_block(as_service, served):
    status, body = as_service(USER_ID).post("/api/v1/memory", {"content": "报告一律用中文写",
                                                               "scope": "USER"})
    assert status == 201, body
    code, lines = node("context.mjs", served.url)
    assert code == 0 and lines[0] == "200", lines
    data = json.loads(lines[1])["data"]
    assert "报告一律用中文写" in data["prompt"]


def test_the_webhook_example_signed_by_standardwebhooks_is_accepted_once(app, node_modules,
                                                                         served):
    capture_on(app, USER_ID)
    event_id = f"ts-{uuid.uuid4()}"
    code, lines = node("webhook.mjs", served.url, EVENT_ID=event_id)
    assert code == 0 and lines[0] == "202", lines
    assert json.loads(lines[1])["data"]["reason"] == "enqueued"
    code, lines = node("webhook.mjs", served.url, EVENT_ID=event_id)
    assert lines[0] == "202" and json.loads(lines[1])["data"]["reason"] == "duplicate_event"


def test_every_run_of_the_webhook_example_is_a_new_delivery(app, node_modules, served):
    capture_on(app, USER_ID)
    reasons = [json.loads(node("webhook.mjs", served.url)[1][1])["data"]["reason"]
               for _ in range(2)]
    assert reasons == ["enqueued", "enqueued"]


def test_the_hand_signed_webhook_example_is_accepted(app, served):
    capture_on(app, USER_ID)
    code, lines = node("webhook-hmac.mjs", served.url)
    assert code == 0 and lines[0] == "202", lines
    assert json.loads(lines[1])["data"]["reason"] == "enqueued"


def test_a_wrong_secret_makes_the_example_exit_1_with_the_401(app, node_modules, served):
    code, lines = node("webhook.mjs", served.url, MEMORY_WEBHOOK_SECRET="not-the-secret")
    assert code == 1 and lines[0] == "401", lines


def test_the_context_read_example_with_the_server_down_says_one_line_and_goes_on_without_memory():
    """As the guide says: no stack trace, the session starts without memory."""
    result = subprocess.run(
        [NODE, "context.mjs"], cwd=EXAMPLES, capture_output=True, text=True, timeout=60,
        env={"PATH": "/usr/bin:/bin", "MEMORY_URL": f"http://127.0.0.1:{free_port()}",
             "MEMORY_SERVICE_TOKEN": SERVICE_TOKEN, "USER_ID": "1"})
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "memory context unavailable (ECONNREFUSED): the session starts without memory"]
