"""Answers for a page request that may come from htmx: the fragment's place or the whole page.

Below every HTML blueprint (the account pages included), it knows Flask and the templates only.
"""

from __future__ import annotations

from flask import Response, make_response, render_template, request

HX_REQUEST = "HX-Request"
# The aria-live region of base.html, always in view: where an error goes when the page has no
# better place for it (a row action, an expired page, a dependency down).
TOAST_TARGET = "#toast"


def is_htmx() -> bool:
    """An htmx request wants a fragment; a history restore after a cache miss wants the page."""
    return (request.headers.get(HX_REQUEST) == "true"
            and request.headers.get("HX-History-Restore-Request") != "true")


def error_response(status: int, heading: str, sentence: str) -> Response:
    """An error the page shows: in the toast for htmx (whatever the request targeted), else as a
    page with a heading."""
    if is_htmx():
        html = render_template("_toast.html", kind="error", text=sentence)
        response = make_response(html, status)
        response.headers["HX-Retarget"] = TOAST_TARGET
        response.headers["HX-Reswap"] = "innerHTML"
        return response
    return make_response(render_template("error.html", title=heading, detail=sentence), status)
