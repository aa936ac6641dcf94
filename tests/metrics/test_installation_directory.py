"""The metrics directory is the installation's own (keyed by its database) and is cleaned of
earlier runs' files when the installation starts — by `serve` or gunicorn's master only — so
two installations on one host never mix and a restart never sums in dead processes (issue 25)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

from app import metrics
from tests.serving import ROOT, gunicorn, process_env, serve

STALE_COUNT = 12090


def _metrics_dir_of(env: dict[str, str]) -> str:
    """The directory a process of that environment picks (it is created on import)."""
    env = {name: value for name, value in env.items() if name != metrics.DIRECTORY_VARIABLE}
    return subprocess.run([sys.executable, "-c", "import app.metrics as m; print(m.directory())"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def _count_in_a_finished_process(path: Path) -> None:
    """A process of an earlier run counted deliveries into `path`, then ended."""
    code = ("import app.metrics as m; "
            f"m.WEBHOOK_EVENTS.labels(reason='enqueued').inc({STALE_COUNT})")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=60,
                   env={**os.environ, metrics.DIRECTORY_VARIABLE: str(path)})


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        return response.read().decode()


def test_two_installations_on_one_host_get_directories_of_their_own():
    one = {"DATABASE_URL": "mysql+pymysql://memory@db/memory_one"}
    two = {"DATABASE_URL": "mysql+pymysql://memory@db/memory_two"}
    assert metrics.default_directory(one) != metrics.default_directory(two)
    assert metrics.default_directory(one) == metrics.default_directory(dict(one))
    assert metrics.default_directory({}) not in (metrics.default_directory(one),
                                                 metrics.default_directory(two))
    assert f"-{os.getuid()}-" in metrics.default_directory(one).name


def test_processes_of_one_installation_share_the_directory_others_do_not():
    one = {**os.environ, "DATABASE_URL": "mysql+pymysql://memory@db/memory_one"}
    two = {**os.environ, "DATABASE_URL": "mysql+pymysql://memory@db/memory_two"}
    picked = [_metrics_dir_of(one), _metrics_dir_of(one), _metrics_dir_of(two)]
    try:
        assert picked[0] == picked[1] != picked[2]
        assert picked[0] == str(metrics.default_directory(one))
    finally:
        for path in set(picked):
            shutil.rmtree(path, ignore_errors=True)


def test_cleaning_removes_files_of_ended_processes_and_keeps_running_ones(tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    names = [f"counter_{os.getpid()}.db", f"counter_horses-of-{os.getpid()}.db",
             f"counter_{ended}.db", f"histogram_horses-of-{ended}.db"]
    for name in names:
        (tmp_path / name).write_bytes(b"")
    removed = metrics.clean_stale_files(str(tmp_path))
    assert sorted(removed) == sorted(names[2:])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names[:2])


def test_serve_cleans_an_earlier_runs_counts_at_start(app, tmp_path):
    directory = tmp_path / "metrics"
    directory.mkdir()
    _count_in_a_finished_process(directory)
    with serve(tmp_path / "instance", tmp_path, PROMETHEUS_MULTIPROC_DIR=str(directory),
               MEMORY_SERVICE_TOKEN="t", MEMORY_WEBHOOK_SECRET="s") as served:
        assert str(STALE_COUNT) not in _scrape(served.url)


def test_gunicorn_master_cleans_an_earlier_runs_counts_at_start(app, tmp_path):
    directory = tmp_path / "metrics"
    directory.mkdir()
    _count_in_a_finished_process(directory)
    assert str(STALE_COUNT) in metrics_text(directory)
    with gunicorn(tmp_path, "gunicorn", PROMETHEUS_MULTIPROC_DIR=str(directory)) as served:
        assert str(STALE_COUNT) not in _scrape(served.url)


def test_gunicorn_refuses_a_malformed_configuration_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, "-m", "gunicorn", "-b", "127.0.0.1:0", "wsgi:app"],
                            cwd=ROOT, env=process_env(MEMORY_LLM_TIMEOUT_S="soon"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "MEMORY_LLM_TIMEOUT_S" in errors[0], result.stderr
    assert "Traceback" not in result.stderr


def metrics_text(directory: Path) -> str:
    from app.metrics.exposition import render

    return render(str(directory)).decode()
