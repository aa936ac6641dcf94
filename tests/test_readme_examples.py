"""The README's integration snippets run as printed against a live server: the `api()` helper
prints each answer's body and its HTTP status on lines of their own, and the webhook example
sends a fresh eventId for a user with auto-capture on, then the same delivery again."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess

from tests.completions import capture_on
from tests.conftest import WEBHOOK_SECRET
from tests.serving import ROOT, in_thread

README = (ROOT / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = README.index(title)
    return README[start:README.index("\n##", start + len(title))]


def test_the_api_helper_prints_the_body_then_the_status_on_its_own_line(app, users):
    users.user("alice")
    token = users.token("alice")
    helper = next(line for line in re.findall(r"^api\(\) \{.*?\}$", README, re.M | re.S))
    with in_thread(app) as url:
        result = subprocess.run(
            ["bash", "-c", f"{helper}\napi GET /api/v1/memory/settings"], capture_output=True,
            text=True, timeout=30, env={"PATH": "/usr/bin:/bin", "URL": url, "TOKEN": token})
    lines = result.stdout.splitlines()
    assert json.loads(lines[0])["data"] == {"autoCaptureEnabled": False}
    assert lines[1] == "HTTP 200"


def test_the_webhook_example_is_accepted_then_answered_duplicate(app, monkeypatch):
    section = _section("### The completion webhook")
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    user_id = int(re.search(r'"userId": (\d+)', code).group(1))
    capture_on(app, user_id)
    printed = io.StringIO()
    with in_thread(app) as url:
        monkeypatch.setenv("URL", url)
        monkeypatch.setenv("SECRET", WEBHOOK_SECRET)
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "README.md", "exec"), {})  # noqa: S102 - the README's own code
    lines = printed.getvalue().splitlines()
    assert lines[0] == "202" and json.loads(lines[1])["data"]["reason"] == "enqueued", lines
    assert lines[2] == "202" and json.loads(lines[3])["data"]["reason"] == "duplicate_event"
