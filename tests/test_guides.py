"""The guides say what the code does: their commands, run as printed against a live `serve`
(issue 38). Capture is off until the platform turns it on with its service token and
`X-User-Id` (D9); a message under 20 characters is enqueued, then skipped (D11); the README's
"Try it" waits for the job before it reads the context."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from tests.completions import capture_on
from tests.conftest import SERVICE_TOKEN, WEBHOOK_SECRET
from tests.serving import ROOT, process_env, serve

USER_ID = 42  # the guides' user


def bash_block(document: Path, marker: str) -> str:
    """The ```bash block of `document` that contains `marker`, without its comment lines."""
    blocks = re.findall(r"```bash\n(.*?)```", document.read_text(encoding="utf-8"), re.S)
    (block,) = [block for block in blocks if marker in block]
    return "\n".join(line for line in block.splitlines() if not line.startswith("#"))


def the_command(block: str, start: str) -> str:
    """The command of `block` that starts with `start`, with its continuation lines."""
    lines = block.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    command = [lines[first]]
    while command[-1].rstrip().endswith("\\"):
        command.append(lines[first + len(command)])
    return "\n".join(command)


def run(command: str, url: str) -> subprocess.CompletedProcess:
    """`command` in bash in the checkout, as the guides' reader runs it after their exports."""
    env = process_env(MEMORY_URL=url, URL=url, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN,
                      MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET)
    return subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def complete(url: str, *extra: str) -> dict:
    """A delivery by `platform complete` for USER_ID; the 202's data."""
    result = run(f".venv/bin/flask --app wsgi platform complete {USER_ID} --url {url} "
                 "--user-message '以后报告都用中文写,我们这个仓库统一用 pnpm 管理依赖' "
                 f"--answer '好的。' {' '.join(extra)}", url)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[2])["data"]


@pytest.fixture
def served(app, tmp_path):
    with serve(tmp_path / "instance", tmp_path, MEMORY_SERVICE_TOKEN=SERVICE_TOKEN,
               MEMORY_WEBHOOK_SECRET=WEBHOOK_SECRET) as running:
        yield running


def test_capture_is_off_until_the_platform_turns_it_on_as_the_integration_guide_shows(served):
    assert complete(served.url)["reason"] == "auto_capture_disabled"
    guide = ROOT / "docs" / "integration.md"
    result = run(bash_block(guide, '"autoCaptureEnabled": true'), served.url)
    assert json.loads(result.stdout)["data"] == {"autoCaptureEnabled": True}, result.stderr
    assert complete(served.url)["reason"] == "enqueued"


def test_a_message_under_20_characters_is_enqueued_then_skipped_as_the_guide_says(
        app, llm, served):
    capture_on(app, USER_ID)
    block = bash_block(ROOT / "docs" / "integration.md", "--wait")
    result = run(the_command(block, ".venv/bin/flask"), served.url)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert json.loads(lines[2])["data"]["reason"] == "enqueued"
    assert lines[3].startswith("outcome: status=skipped reason=user_message_too_short ")
    assert llm.requests == [], "D11: no model call"


def test_try_it_waits_for_the_job_so_the_next_context_read_has_the_memory(app, llm, served):
    capture_on(app, USER_ID)
    llm.reply_items([{"type": "user", "action": "insert", "content": "输出报告用中文"}])
    block = bash_block(ROOT / "README.md", "platform complete 42")
    result = run(the_command(block, ".venv/bin/flask --app wsgi platform complete"), served.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "outcome: status=succeeded reason=applied inserted=1 " in result.stdout
    request = urllib.request.Request(
        f"{served.url}/api/v1/internal/memory/context?userId={USER_ID}&projectKey=mao",
        headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        assert "- [用户] 输出报告用中文" in json.loads(response.read())["data"]["prompt"]


def test_the_snippets_take_the_port_from_a_variable():
    """No hard-coded 5000 in a command: `PORT` (its default where one is shown)."""
    for document in (ROOT / "README.md", ROOT / "docs" / "integration.md"):
        for block in re.findall(r"```bash\n(.*?)```", document.read_text(encoding="utf-8"),
                                re.S):
            for line in block.splitlines():
                assert ":5000" not in line or "${PORT:-5000}" in line, f"{document}: {line}"
