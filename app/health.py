"""Liveness probe for load balancers and orchestrators."""

from flask import Blueprint

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def healthz():
    """The process answers; touches no dependency, so it stays cheap under any load."""
    return {"status": "ok"}
