"""The harness: its shared app (reused while no test changes it, replaced as soon as one does),
its snapshot of the database ("nothing changed"), and the fork server its workers start from."""

from __future__ import annotations

import signal
import socket
from pathlib import Path

from app.extensions import db
from tests import forked_commands, serving
from tests.conftest import DefaultApp, snapshot
from tests.serving import ROOT, process_env
from tests.workers import registered_workers, wait_until, worker_env, worker_states


def test_the_default_app_is_reused_by_the_next_test_when_nothing_changed_it():
    shared = DefaultApp()
    first = shared.get()
    shared.after_test(clean=True)
    assert shared.get() is first


def test_a_test_that_changed_the_default_apps_configuration_gets_it_replaced():
    shared = DefaultApp()
    first = shared.get()
    first.config["MEMORY_BOT_PROJECT_KEYS"] = ("another-bot",)
    shared.after_test(clean=True)
    assert shared.get() is not first
    assert shared.get().config["MEMORY_BOT_PROJECT_KEYS"] == ("weixin-bot",)


def test_a_change_inside_a_configuration_value_is_seen_too():
    shared = DefaultApp()
    first = shared.get()
    first.config["SQLALCHEMY_ENGINE_OPTIONS"]["pool_size"] = 1
    shared.after_test(clean=True)
    assert shared.get() is not first


def test_a_test_that_replaced_an_extension_or_added_a_route_gets_it_replaced():
    shared = DefaultApp()
    first = shared.get()
    first.extensions["context_cache"] = object()
    shared.after_test(clean=True)
    second = shared.get()
    assert second is not first
    second.add_url_rule("/extra", "extra", lambda: "")
    shared.after_test(clean=True)
    assert shared.get() is not second


def test_a_test_that_left_something_behind_gets_the_app_replaced():
    shared = DefaultApp()
    first = shared.get()
    shared.after_test(clean=False)
    assert shared.get() is not first


def test_a_snapshot_sees_a_row_added_to_any_table(app, memories, users):
    before = snapshot(app)
    assert set(before) == {table.name for table in db.metadata.sorted_tables}
    alice = users.user("alice")
    after_user = snapshot(app)
    assert after_user != before
    memories.add(alice, "报告用中文")
    assert snapshot(app)["memory_item"] != after_user["memory_item"]


def test_a_forked_command_reads_its_own_environment_and_exits_with_the_commands_status(
        tmp_path: Path):
    """The app reads its environment when imported: in the child, not in the fork server."""
    metrics = tmp_path / "metrics"
    command = forked_commands.start(
        ["--app", "wsgi", "worker"], cwd=ROOT, output=tmp_path / "out.log",
        env=process_env(MEMORY_LLM_TIMEOUT_S="soon", PROMETHEUS_MULTIPROC_DIR=str(metrics)))
    assert command.wait(timeout=30) == 1
    assert "MEMORY_LLM_TIMEOUT_S='soon'" in (tmp_path / "out.log").read_text()
    assert metrics.is_dir()


def test_a_forked_worker_is_a_process_of_its_own_that_signals_stop(app, tmp_path: Path):
    command = forked_commands.start(["--app", "wsgi", "worker"], env=worker_env(), cwd=ROOT,
                                    output=tmp_path / "worker.log")
    # Idle: RQ installs its SIGTERM handler after registering, before it first waits for a job.
    wait_until(lambda: worker_states() == ["idle"], 30, "the worker to wait for jobs")
    assert command.poll() is None
    command.send_signal(signal.SIGTERM)
    assert command.wait(timeout=30) == 0  # RQ's warm shutdown
    assert registered_workers() == 0
    assert "warm shut down requested" in (tmp_path / "worker.log").read_text()


def test_a_web_process_whose_port_was_taken_meanwhile_starts_on_another(app, tmp_path: Path,
                                                                          monkeypatch):
    """`free_port` frees the port it found; another process (or an outgoing connection's source
    port) may take it before `serve` binds it: the harness starts it again on another port
    instead of failing the test (seen in CI: "Address already in use")."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        ports = iter([taken.getsockname()[1]])
        free = serving.free_port
        monkeypatch.setattr(serving, "free_port", lambda: next(ports, None) or free())
        with serving.serve(tmp_path / "instance", tmp_path) as served:
            assert served.url != f"http://127.0.0.1:{taken.getsockname()[1]}"
