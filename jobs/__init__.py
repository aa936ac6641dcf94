"""The background jobs: their kinds, the RQ entry points, and the worker.

`app/` never imports this package. `init_app` hands the app the job kinds it enqueues
(`app.extraction.queue.job_kinds`) and adds the `worker` command; `wsgi.py` calls it right after
`create_app`. The entry points are thin: RQ calls them with a payload of ids and text inside the
worker's app context, and each runs one attempt of its job through `app.extraction.runner`.
"""

from __future__ import annotations

from flask import Flask

from app import startup
from app.extraction import runner
from app.extraction.outcomes import JobKindName
from app.extraction.queue import JobKind, JobKinds
from jobs.consolidation import consolidate_memories
from jobs.extraction import extract_memories
from jobs.worker import record_abandoned, worker_command

EXTRACTION = JobKind(JobKindName.EXTRACTION, extract_memories, runner.run_extraction)
# D15: enqueued by an extraction that persisted something (app.extraction.trigger).
CONSOLIDATION = JobKind(JobKindName.CONSOLIDATION, consolidate_memories,
                        runner.run_consolidation)


def init_app(app: Flask) -> None:
    app.extensions["memory_job_kinds"] = JobKinds(EXTRACTION, CONSOLIDATION,
                                                  on_failure=record_abandoned)
    # The worker first checks what it stands on: one line, not a traceback, when Redis or the
    # database does not answer; a warning when the model's key is unset.
    # `--burst` has nothing to wait for: Redis down is one line and exit 1 (SPEC §11).
    app.cli.add_command(startup.with_start_checks(
        worker_command, needs_redis=True, redis_required=lambda burst, **_: burst))
