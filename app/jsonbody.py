"""Request bodies as JSON, parsed by the app's JSON provider: never nested deeper than 32 levels.

Python's parser recurses once per level, so a body of 100,000 brackets raised RecursionError (a
500 with a traceback per request); and nothing the service takes is deeper than a few levels. A
body over the limit is the usual 2001, whatever route reads it (`request.get_json`, silent or
not: the refusal is a domain error, not the ValueError a silent read would swallow).
"""

from __future__ import annotations

import json
import re
from typing import Any

from flask.json.provider import DefaultJSONProvider

from app.errors import InvalidInput

MAX_DEPTH = 32
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(rb"[\[\]{}]")


def too_deep(raw: bytes | str, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `limit`.

    Most bodies hold fewer brackets than the limit at all, which settles it at C speed; only
    the others are scanned, strings cut out first so brackets inside text do not count.
    """
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub(b"", data)):
        depth += 1 if bracket in (b"[", b"{") else -1
        if depth > limit:
            return True
    return False


def refuse_deep(raw: bytes | str) -> None:
    if too_deep(raw):
        raise InvalidInput("json_too_deep", f"JSON must not nest deeper than {MAX_DEPTH} levels")


class RequestJSONProvider(DefaultJSONProvider):
    """Flask's provider, with the depth limit on everything it parses and the service's own
    output settings: UTF-8 JSON (memories are mostly Chinese, and escaping every character
    tripled the size of the context read's answer), keys in the order the code writes them."""

    ensure_ascii = False
    sort_keys = False

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        refuse_deep(s)
        return json.loads(s, **kwargs)
