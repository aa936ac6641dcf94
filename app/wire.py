"""Text on the wire → plain values: ids, versions and query strings, read the same way by the
pages, X-User-Id, the schemas' ids and every path, before any domain rule is asked.

Forms, headers and query strings carry text (the JSON API reads its requests through
`app.schemas`, whose ids are read by `ascii_id` too). A value that cannot be read is the usual
2001 (`InvalidInput`), named after the parameter. This module knows no domain value (those are
`app.params`), so the envelope and the identity below the domain can use it.

Every id anywhere (SPEC §9 Input, stricter) is ASCII digits and nothing else: pydantic's lax
integers read `42.0`, `4_2`, `+42`, ` 42 ` and `42\n` as user 42 (the context read took them
all), and int() reads full-width `４２` too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote_to_bytes

from werkzeug.datastructures import ETags
from werkzeug.routing import IntegerConverter

from app.errors import InvalidInput
from app.keys import ID_MAX


def ascii_id(raw: Any) -> Any:
    """An id written as text (query string, header, form): its value when it is ASCII digits and
    nothing else; ValueError otherwise. Anything but a str (a JSON number) is left to the caller's
    own type check."""
    if not isinstance(raw, str):
        return raw
    # str.isdigit() alone also takes '４２' and '²'; int() also takes '4_2', '+42' and ' 42 '.
    if not (raw.isascii() and raw.isdigit()):
        raise ValueError("must be written with the digits 0-9 only")
    return int(raw)


class AsciiIntegerConverter(IntegerConverter):
    """`<int:…>` in a route, ASCII digits only: werkzeug's own `\\d+` matches full-width and other
    Unicode digits, which int() then reads (`/api/v1/memory/４２` was item 42). Any other
    segment names no resource: 404, as `/api/v1/memory/abc` always was."""

    regex = "[0-9]+"


def user_id(raw: str | None, name: str) -> int:
    """A platform user id: a positive integer that fits a BIGINT, in ASCII digits only."""
    if raw is None or raw == "":
        raise InvalidInput("user_id_required", f"{name} is required")
    try:
        value = ascii_id(raw)
    except ValueError:
        value = 0
    if not 0 < value <= ID_MAX:
        raise InvalidInput("user_id_invalid", f"{name} must be a positive integer")
    return value


def expected_versions(if_match: ETags) -> frozenset[int] | None:
    """The versions an `If-Match` header (werkzeug's parse of it, `request.if_match`) accepts:
    its entity tags, strong `"3"` or weak `W/"3"` alike, that are versions (ASCII digits); a tag
    that is not one matches no version. None: no header (or `*`, any current version) — no
    precondition, the last write wins."""
    if if_match.star_tag or not if_match:
        return None
    # A version is an INT: more digits than a BIGINT has can name none (and int() refuses
    # 4300 of them with a ValueError, a 500).
    return frozenset(int(tag) for tag in if_match.as_set(include_weak=True)
                     if tag.isascii() and tag.isdigit() and len(tag) <= len(str(ID_MAX)))


def query_is_utf8(query_string: str) -> bool:
    """Whether a query string (as WSGI hands it: the raw bytes as latin-1 text) is UTF-8 once
    percent-decoded. werkzeug would put U+FFFD for `%FF` or an encoded lone surrogate
    (`%ED%A0%80`) and go on; a parameter the client did not write must be refused (2001)."""
    if query_string.isascii() and "%" not in query_string:
        return True
    try:
        # Decoded whole: a separator is ASCII, so no UTF-8 sequence can span two parameters.
        unquote_to_bytes(query_string.encode("latin-1")).decode("utf-8")
    except UnicodeError:
        return False
    return True


def query_pairs(query_string: str) -> list[tuple[str, str]]:
    """The parameters of a query string, in order, blanks kept; InvalidInput unless it is
    UTF-8 (`query_is_utf8`)."""
    if not query_is_utf8(query_string):
        raise InvalidInput("query_not_utf8", "the query string is not valid UTF-8")
    return parse_qsl(query_string.encode("latin-1").decode("utf-8"), keep_blank_values=True)
