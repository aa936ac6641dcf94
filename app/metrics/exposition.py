"""`GET /metrics`: the samples of every process of this installation, summed (Prometheus text).

The scrape reads the sample files of the metrics directory (one per web process, one per
worker and one for its horses), never a table: its cost does not grow with history.
"""

from __future__ import annotations

from flask import Blueprint, Response
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

from app import metrics

bp = Blueprint("metrics", __name__)


def render(path: str | None = None) -> bytes:
    """The exposition text of every sample file in `path` (default: the metrics directory)."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=path or metrics.directory())
    return generate_latest(registry)


@bp.get("/metrics")
def scrape():
    """Job outcomes per kind/status/reason, job durations, LLM tokens, consolidation rows and
    operations, webhook deliveries per answer."""
    return Response(render(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
