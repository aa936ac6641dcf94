"""The benchmarks' runner (`python -m bench.run`), which leaves a shared database server's
settings alone unless told otherwise, and the LLM stub as a person runs it by hand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from app.extensions import db
from app.system import service as system
from bench import run
from tests.completions import USER_ID, capture_on, event
from tests.conftest import assert_ok
from tests.serving import free_port
from tests.workers import ROOT, wait_until

SMALL_POOL = 128 * 1024**2


def test_bench_leaves_the_buffer_pool_alone_without_the_flag():
    args = run.parse_args(["context"])
    assert args.grow_buffer_pool is False
    assert run.buffer_pool_statement(SMALL_POOL, args.grow_buffer_pool) is None


def test_bench_grows_the_buffer_pool_only_with_the_flag():
    args = run.parse_args(["--grow-buffer-pool", "context"])
    assert args.grow_buffer_pool is True and args.names == ["context"]
    assert run.buffer_pool_statement(SMALL_POOL, True) == \
        "SET GLOBAL innodb_buffer_pool_size = 1073741824"
    assert run.buffer_pool_statement(run.BUFFER_POOL_BYTES, True) is None


def test_bench_help_names_the_flag_and_what_it_changes(capsys):
    with pytest.raises(SystemExit):
        run.parse_args(["--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--grow-buffer-pool SET GLOBAL innodb_buffer_pool_size" in help_text
    assert "changes the whole MariaDB server" in help_text



@pytest.fixture
def stub_reply(tmp_path):
    """`python -m bench.llm_stub PORT --reply …` as the README starts it; its base URL."""
    port = free_port()
    log = (tmp_path / "stub.err").open("w")
    process = subprocess.Popen([sys.executable, "-m", "bench.llm_stub", str(port), "--reply",
                                json.dumps([{"type": "user", "action": "insert",
                                             "content": "输出报告用中文"}], ensure_ascii=False)],
                               cwd=ROOT, stderr=log)
    try:
        wait_until(lambda: f"http://127.0.0.1:{port}/v1" in
                   (tmp_path / "stub.err").read_text(), 30, "the stub")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)
        log.close()


def test_llm_stub_by_hand_answers_its_fixed_reply(app, stub_reply, webhook, run_jobs, memories,
                                                   monkeypatch):
    """Registered as the README's walkthrough does, the stub teaches the fixed memory."""
    monkeypatch.setenv("STUB_LLM_API_KEY", "unused")
    with app.app_context():
        system.add_model("stub", "stub-model", base_url=stub_reply, api_key_env="STUB_LLM_API_KEY",
                         default=True)
        db.session.remove()
    capture_on(app)
    assert_ok(webhook(event()), 202)
    run_jobs()
    assert memories.count(USER_ID, content="输出报告用中文", source="AUTO") == 1
