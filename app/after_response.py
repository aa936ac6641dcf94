"""Work an answer hands to the moment after it is sent.

A WSGI server calls the body's `close()` once it has written the body (PEP 3333), so work done
there costs the client nothing: it has its answer. An endpoint collects such work while it
answers (`collecting`) and returns its body through `closing`, werkzeug's `ClosingIterator`;
`defer` hands work to it, or does it at once where no answer collects it (a Flask view, a
command, a job).

Only what may run late belongs here — a cache store whose versioned key makes a late one
harmless — and it runs outside the app context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import partial

from werkzeug.wsgi import ClosingIterator

log = logging.getLogger(__name__)

Work = Callable[[], None]

_pending: ContextVar[list[Work] | None] = ContextVar("after_response", default=None)


def defer(work: Work) -> None:
    """`work` once the answer being made is sent; now when none collects it."""
    pending = _pending.get()
    if pending is None:
        work()
    else:
        pending.append(work)


@contextmanager
def collecting() -> Iterator[list[Work]]:
    """What `defer` is handed while the block runs."""
    pending: list[Work] = []
    token = _pending.set(pending)
    try:
        yield pending
    finally:
        _pending.reset(token)


def closing(body: list[bytes], pending: list[Work]) -> Iterable[bytes]:
    """`body`, whose `close()` runs `pending`."""
    if not pending:
        return body
    return ClosingIterator(body, partial(_run, pending))


def _run(pending: list[Work]) -> None:
    for work in pending:
        try:
            work()
        except Exception:  # the answer is sent: nobody to tell but the log
            log.exception("event=after_response.failed")
