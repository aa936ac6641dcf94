"""The platform's context read, answered before Flask when the request is plainly valid (issue 12).

Every new agent session reads its user's block, and a warm read is one Redis HMGET; on a 2-core
box Flask's request cycle around it (request context, routing, the `service_api` decorator,
after_request hooks, a Response object) cost more than the read itself and kept the endpoint
under the raw-cursor floor of `bench.run context`. So this WSGI layer, wrapped around the app's
`wsgi_app` by `create_app` (gunicorn's `wsgi:app`, the bench and the test client all pass through
it), answers `GET` on the route's own path itself — with the same checks, the same domain call
and the same bytes as the route in `app/platform/api.py`:

- the service token through `identity.bearer_token` and `identity.is_service_token` (constant
  time), the query through the route's model `ContextQuery`, the project key and bot keys
  through `service.context_json` — the route's own domain call (cache lookup, else the
  injection reads on the raw read pool, then the store);
- the body is `envelope.ok_body`, the headers those the route's response gets from Flask and
  `security_headers` (its constants): Content-Type, Content-Length, the every-response pair
  and `Cache-Control: no-store` (the request carried credentials). The route counts no metric.

Anything else goes to Flask untouched, so every refusal keeps its envelope and status: another
method or path, a cookie or a request body, a query string that is not plain UTF-8 or names a
parameter twice or one the model does not know, a missing or wrong token, a query the model
refuses, and any exception at all. Falling through is always correct, only slower; the tests
hold both paths to the same bytes and headers. A dependency failure (the database down; Redis
trouble never gets this far, the cache reads the database instead) is handed to the route with
the request (`FAILED`), which raises it after its own checks: the same 503 and log line,
without a second lookup and a second wait on a database that just failed.
"""

from __future__ import annotations

from wsgiref.types import WSGIEnvironment

from pydantic import ValidationError

from app.auth.identity import bearer_token, is_service_token
from app.envelope import ok_body
from app.errors import DomainError, InvalidInput
from app.memory import service
from app.params import query_pairs
from app.platform.fast_path import FastPath
from app.schemas.platform import ContextQuery
from app.security_headers import EVERY_RESPONSE, PRIVATE

ENDPOINT = "platform_api.memory_context"
# The environ key of a dependency failure met here (a WSGI server never puts a dotted key there
# from a request: headers arrive as HTTP_*).
FAILED = "memory.fast_context.failed"
# The only parameters taken here: the model's own fields (a query naming others goes to Flask).
PARAMETERS = frozenset(ContextQuery.model_fields)


def _query(query_string: str) -> dict[str, str] | None:
    """The query as `request.args.to_dict()` gives it, when it is plain: strict UTF-8 (werkzeug
    would keep bad bytes percent-encoded), no parameter twice, none the model does not know."""
    try:
        pairs = query_pairs(query_string)
    except InvalidInput:
        return None
    query = dict(pairs)
    if len(query) != len(pairs) or not PARAMETERS.issuperset(query):
        return None
    return query


def _plain_request(environ: WSGIEnvironment) -> bool:
    """No cookie (Flask would open a browser session for it) and no body (the route reads
    none): the platform's own requests carry neither."""
    return ("HTTP_COOKIE" not in environ and not environ.get("CONTENT_LENGTH", "0").strip("0")
            and "HTTP_TRANSFER_ENCODING" not in environ)


class FastContext(FastPath):
    """The context read of a plainly valid request, answered in front of Flask."""

    name = "context"
    failed = FAILED
    endpoint = ENDPOINT
    method = "GET"
    status = "200 OK"
    headers = (*EVERY_RESPONSE, PRIVATE)

    def answer(self, environ: WSGIEnvironment) -> bytes | None:
        """The body of the 200 answer, or None: let Flask answer."""
        if not _plain_request(environ):
            return None
        query = _query(environ.get("QUERY_STRING", ""))
        if query is None:
            return None
        # The domain reads its cache, pools and settings through `current_app`; an app context
        # costs a few microseconds (a Flask request about 350), so the domain stays as it is.
        with self.app.app_context():
            if not is_service_token(bearer_token(environ.get("HTTP_AUTHORIZATION", ""))):
                return None
            try:
                valid = ContextQuery.model_validate(query)
                return ok_body(service.context_json(valid.userId, valid.projectKey)).encode()
            except (ValidationError, DomainError):
                return None  # a refusal: the route gives its 400
