"""The completion webhook (SPEC §5): `POST /api/v1/webhooks/task-completed`.

Authenticated by an HMAC of the raw body, not by a token, so a captured request cannot be
replayed after 300 s nor altered. The route checks the signature and the body, then hands the
event to `app.extraction.intake`, which records it and decides; it never calls the LLM.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

from flask import Blueprint, current_app, request

from app.envelope import ApiError, ErrorCode, json_body, ok
from app.extraction import intake
from app.extraction.models import EVENT_ID_MAX
from app.memory.rules import ID_MAX

bp = Blueprint("webhook", __name__, url_prefix="/api/v1/webhooks")

SIGNATURE_HEADER = "X-Memory-Signature"
TIMESTAMP_HEADER = "X-Memory-Timestamp"
MAX_SKEW_S = 300


def signature(secret: str, timestamp: str, raw_body: bytes) -> str:
    """`sha256=<hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>`."""
    digest = hmac.new(secret.encode("utf-8"), timestamp.encode("ascii") + b"." + raw_body,
                      hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def _verify_signature() -> None:
    secret = current_app.config.get("MEMORY_WEBHOOK_SECRET")
    if not secret:
        raise ApiError(ErrorCode.INTERNAL_ERROR, "the webhook is not configured "
                       "(MEMORY_WEBHOOK_SECRET is unset)", 503)
    timestamp = request.headers.get(TIMESTAMP_HEADER, "").strip()
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        raise ApiError(ErrorCode.UNAUTHORIZED, f"{TIMESTAMP_HEADER} must be unix seconds")
    if abs(time.time() - int(timestamp)) > MAX_SKEW_S:
        raise ApiError(ErrorCode.UNAUTHORIZED,
                       f"{TIMESTAMP_HEADER} is more than {MAX_SKEW_S} s off")
    given = request.headers.get(SIGNATURE_HEADER, "").strip()
    expected = signature(secret, timestamp, request.get_data(cache=True))
    if not hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8")):
        raise ApiError(ErrorCode.UNAUTHORIZED, f"bad or missing {SIGNATURE_HEADER}")


def _invalid(message: str) -> ApiError:
    return ApiError(ErrorCode.PARAM_INVALID, message)


def _id(body: dict[str, Any], name: str) -> int:
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= ID_MAX:
        raise _invalid(f"{name} must be a positive integer")
    return value


def _text(body: dict[str, Any], name: str, max_length: int, *,
          required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise _invalid(f"{name} must be a non-empty string" if required
                       else f"{name} must be a string or null")
    if len(value) > max_length:
        raise _invalid(f"{name} must be at most {max_length} characters")
    return value


def _message(body: dict[str, Any], name: str) -> str | None:
    """A string, or an array of parts of which only {"type": "text", "text": …} count (D8)."""
    value = body.get(name)
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _invalid(f"{name} must be a string, an array of parts or null")
    texts = []
    for part in value:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _invalid(f"each part of {name} must be an object with a type")
        if part["type"] == "text":
            if not isinstance(part.get("text"), str):
                raise _invalid(f"a text part of {name} must carry a string text")
            texts.append(part["text"])
    return "\n".join(texts)


def parse_event(body: dict[str, Any]) -> intake.TaskCompleted:
    """The webhook body, validated; every problem is a 400 (2001) that names the field."""
    return intake.TaskCompleted(
        event_id=_text(body, "eventId", EVENT_ID_MAX, required=True) or "",
        session_id=_id(body, "sessionId"),
        user_id=_id(body, "userId"),
        project_key=_text(body, "projectKey", 255),
        workspace=_text(body, "workspace", 512),
        session_type=_text(body, "sessionType", 32),
        channel=_text(body, "channel", 32),
        phase=_text(body, "phase", 32, required=True) or "",
        user_message=_message(body, "lastUserMessage"),
        assistant_message=_message(body, "lastAssistantMessage"),
    )


@bp.post("/task-completed")
def task_completed():
    """202 `{accepted, enqueued, reason}`: the session is recorded; extraction is enqueued only
    for a COMPLETED main-session task of a user with auto-capture on, once per eventId."""
    _verify_signature()
    event = parse_event(json_body())
    enqueued, reason = intake.receive(event)
    return ok({"accepted": True, "enqueued": enqueued, "reason": reason}, 202)
