"""The worker rehearses an extraction before it forks (`runner.warm_up`), so each work horse it
forks finds the statements compiled, and loads the SDK's lazy parts (`llm.warm_up`)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from app.db_types import utcnow
from app.extensions import db
from app.extraction import runner
from tests.completions import (
    USER_ID,
    capture_on,
    event,
    last_consolidation,
    only_outcome,
    script,
)
from tests.conftest import assert_ok, snapshot
from tests.serving import modules_after_import_wsgi

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def statements_sent(app) -> Iterator[set[str]]:
    """The SQL texts the app's engine sends meanwhile."""
    sent: set[str] = set()

    def grab(conn, cursor, statement, parameters, context, executemany):
        sent.add(" ".join(statement.split()))

    with app.app_context():
        engine = db.engine
    sa.event.listen(engine, "before_cursor_execute", grab)
    try:
        yield sent
    finally:
        sa.event.remove(engine, "before_cursor_execute", grab)


def test_warm_up_changes_no_row(app, llm, memories):
    memories.add(USER_ID, "用中文写报告", source="AUTO")
    before = snapshot(app)
    with app.app_context():
        runner.warm_up()
    assert snapshot(app) == before


def test_warm_up_sends_every_statement_an_extraction_sends(app, llm, webhook, run_jobs,
                                                           memories):
    capture_on(app)
    last_consolidation(app, utcnow())
    auto = memories.add(USER_ID, "部署前先跑测试", source="AUTO")
    reworded = memories.add(USER_ID, "报告用中文写", source="AUTO", scope="PROJECT",
                            project_key="mao")
    with statements_sent(app) as rehearsed, app.app_context():
        runner.warm_up()
    script(llm, [{"type": "user", "content": "一条新学到的事实"},
                 {"type": "user", "action": "touch", "existingId": auto},
                 {"type": "project", "action": "update", "existingId": reworded,
                  "content": "所有报告都用中文写"}])
    assert assert_ok(webhook(event()), 202)["enqueued"] is True
    with statements_sent(app) as job:
        run_jobs()
    outcome = only_outcome(app)
    assert (outcome["inserted"], outcome["touched"], outcome["updated"]) == (1, 1, 1)
    assert job - rehearsed == set()


LLM_CHILD = textwrap.dedent("""
    import json, os, sys
    from app.extraction import llm
    llm.warm_up()
    loaded = set(sys.modules)
    model = llm.ChatModel(1, "scripted", "scripted-default", sys.argv[1], None)
    answer = llm.complete(model, [{"role": "user", "content": "hello"}], 5)
    print(json.dumps({"text": answer.text, "new": sorted(set(sys.modules) - loaded)}))
""")


def test_after_the_sdk_warm_up_an_llm_call_loads_no_module(llm):
    llm.reply("[]")
    result = subprocess.run([sys.executable, "-c", LLM_CHILD, llm.base_url], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    child = json.loads(result.stdout.strip().splitlines()[-1])
    assert child == {"text": "[]", "new": []}


SCHEMA_CHILD = textwrap.dedent("""
    import json, sys
    import pydantic
    from app.extraction import llm
    llm.warm_up()
    built = []
    build = pydantic.TypeAdapter.__init__
    def counted(self, kind, *args, **kwargs):
        built.append(repr(kind))
        return build(self, kind, *args, **kwargs)
    pydantic.TypeAdapter.__init__ = counted
    model = llm.ChatModel(1, "scripted", "scripted-default", sys.argv[1], None)
    messages = [{"role": "system", "content": "rules"}, {"role": "user", "content": "hello"}]
    answer = llm.complete(model, messages, 5)
    print(json.dumps({"text": answer.text, "tokens": answer.prompt_tokens, "built": built}))
""")


def test_after_the_sdk_warm_up_a_jobs_llm_call_builds_no_validator(llm):
    """A forked work horse keeps nothing it builds: the warm-up before the fork parses an
    answer as endpoints send it (token counts included) to a job's messages (system and user),
    so no horse builds a pydantic validator for the SDK again."""
    llm.reply("[]")
    result = subprocess.run([sys.executable, "-c", SCHEMA_CHILD, llm.base_url], cwd=ROOT,
                            capture_output=True, text=True, timeout=60, check=True)
    child = json.loads(result.stdout.strip().splitlines()[-1])
    assert child["text"] == "[]" and child["tokens"] is not None
    assert child["built"] == []


def test_the_sdk_warm_up_sends_nothing_over_the_network(llm):
    from app.extraction import llm as client

    client.warm_up()
    assert llm.requests == []


def test_a_web_process_does_not_load_the_model_sdk():
    """Web processes and commands never call a model: the openai SDK (~0.5 s to import, and
    its memory) is loaded by the first process that does, or a worker's warm-up."""
    assert {"openai", "httpx2"} & modules_after_import_wsgi() == set()
