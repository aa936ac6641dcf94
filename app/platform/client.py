"""The platform's side of the completion webhook (SPEC §5), for `flask --app wsgi platform
complete`: one event, signed and posted exactly as a platform must, so an operator can test a
running service by hand without writing the HMAC themselves."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from app.platform.signatures import SIGNATURE_HEADER, TIMESTAMP_HEADER, signature

WEBHOOK_PATH = "/api/v1/webhooks/task-completed"


class Unreachable(Exception):
    """No HTTP answer at all: nothing listens there, or the connection failed."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: str


def deliver(base_url: str, secret: str, event: dict[str, Any], *,
            timeout_s: float = 10) -> Answer:
    """POST `event` to the service at `base_url`, signed with `secret` and stamped now; any
    HTTP answer (a refusal included) is returned, not raised."""
    raw = json.dumps(event, ensure_ascii=False).encode("utf-8")
    stamp = str(int(time.time()))
    request = urllib.request.Request(
        base_url.rstrip("/") + WEBHOOK_PATH, data=raw, method="POST",
        headers={"Content-Type": "application/json", TIMESTAMP_HEADER: stamp,
                 SIGNATURE_HEADER: signature(secret, stamp, raw)})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Answer(response.status, response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read().decode("utf-8", "replace"))
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(f"{base_url}: {getattr(exc, 'reason', exc)}") from None
