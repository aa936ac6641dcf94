"""The platform's two hot paths — the context read and the completion webhook — each answered by
one WSGI endpoint that owns its path, in front of Flask's request cycle.

Every agent session costs one of each, and on a 2-core box Flask's cycle around them (request
context, routing, a Response object, the hooks) cost more than their own work: a warm context
read is one Redis read, a delivery three round trips (`bench.run context webhook`). So a path
dispatcher (werkzeug's `DispatcherMiddleware` pattern, by exact path) sends these two paths to
their endpoints and every other request to Flask, untouched.

An endpoint answers everything on its path — the success, every refusal (the same envelope and
error table as Flask's handlers: `envelope.refusal`), OPTIONS and 405 with `Allow`, a dependency
down (503) and a bug (500) — and nothing falls through to a second implementation. So no Flask
hook runs for the platform's traffic: what these paths need (security headers, metrics) they
do themselves, from the same constants. The Flask routes stay registered for the URL map and
the OpenAPI document, and hand their request to the same endpoint. Work an endpoint leaves for
after its answer (the context cache's store) runs when the server closes the answer
(`app.after_response`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import ClassVar
from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

from flask import Flask, current_app
from werkzeug.exceptions import MethodNotAllowed

from app import after_response, tracing
from app.envelope import failure, refusal
from app.security_headers import EVERY_RESPONSE, PRIVATE

CONTENT_TYPE = ("Content-Type", "application/json")
# What Flask says of an answer to a request without credentials: it looked at the (absent)
# session cookie.
VARY = ("Vary", "Cookie")
STATUS_LINES = {200: "200 OK", 202: "202 ACCEPTED", 400: "400 BAD REQUEST",
                401: "401 UNAUTHORIZED", 403: "403 FORBIDDEN", 404: "404 NOT FOUND",
                405: "405 METHOD NOT ALLOWED", 409: "409 CONFLICT",
                413: "413 REQUEST ENTITY TOO LARGE", 500: "500 INTERNAL SERVER ERROR",
                503: "503 SERVICE UNAVAILABLE"}


class HotPath(ABC):
    """A WSGI endpoint answering every request on the path of the Flask route `endpoint`."""

    endpoint: ClassVar[str]
    methods: ClassVar[tuple[str, ...]]  # what `answer` takes (HEAD follows GET, as in Flask)

    def __init__(self, app: Flask) -> None:
        self.app = app
        (rule,) = app.url_map.iter_rules(self.endpoint)
        if rule.arguments:
            raise RuntimeError(f"{self.endpoint} has path variables; a hot path takes none")
        self.path = rule.rule
        taken = set(self.methods) | ({"HEAD"} if "GET" in self.methods else set())
        self.allow = ", ".join(sorted(taken | {"OPTIONS"}))
        self._taken = frozenset(taken)

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD", "GET")
        headers = [*EVERY_RESPONSE]
        if "HTTP_AUTHORIZATION" in environ or "HTTP_COOKIE" in environ:
            headers.append(PRIVATE)  # as `security_headers` does for requests with credentials
        else:
            headers.append(VARY)
        if method == "OPTIONS":
            start_response("200 OK", [("Allow", self.allow), ("Content-Length", "0"), *headers])
            return [b""]
        with self.app.app_context(), after_response.collecting() as pending:
            try:
                if method not in self._taken:
                    headers.append(("Allow", self.allow))
                    raise MethodNotAllowed(valid_methods=sorted(self._taken))
                status, text = self.answer(environ)
            except Exception as exc:  # every refusal and failure, through the one table
                error, message, status = refusal(exc, self.path, self.app.logger)
                text = self.app.json.dumps(failure(error, message)) + "\n"
        body = text.encode("utf-8")
        start_response(STATUS_LINES.get(status, f"{status} ERROR"),
                       [CONTENT_TYPE, ("Content-Length", str(len(body))), *headers])
        return after_response.closing([b""] if method == "HEAD" else [body], pending)

    @abstractmethod
    def answer(self, environ: WSGIEnvironment) -> tuple[int, str]:
        """The success: its status and body; a refusal is raised (`ApiError`, `DomainError`, a
        werkzeug `HTTPException`), as in a Flask view."""



def served_by(endpoint: str) -> WSGIApplication:
    """What the Flask route of a hot path returns: its endpoint, run on Flask's request (a view
    may return a WSGI application), so a request that reaches Flask for the path — one that
    did not pass the dispatcher — gets the same answer from the same code."""
    return current_app.extensions["hot_paths"][endpoint]


class HotPaths:
    """The path dispatcher around Flask's `wsgi_app`."""

    def __init__(self, app: Flask, endpoints: Iterable[HotPath]) -> None:
        self.flask: WSGIApplication = app.wsgi_app
        # Traced here when tracing is on: Flask's instrumentation never sees these paths.
        self.endpoints: Mapping[str, WSGIApplication] = {
            endpoint.path: tracing.traced_wsgi(endpoint) for endpoint in endpoints}

    @classmethod
    def install(cls, app: Flask, *endpoint_classes: type[HotPath]) -> None:
        """In front of `app`'s WSGI callable, after its routes are registered."""
        endpoints = [endpoint_class(app) for endpoint_class in endpoint_classes]
        app.extensions["hot_paths"] = {endpoint.endpoint: endpoint for endpoint in endpoints}
        # Flask's documented way to put middleware in front of the app (typed as a method).
        app.wsgi_app = cls(app, endpoints)  # type: ignore[method-assign]

    def __call__(self, environ: WSGIEnvironment,
                 start_response: StartResponse) -> Iterable[bytes]:
        endpoint = self.endpoints.get(environ.get("PATH_INFO", ""))
        if endpoint is None:
            return self.flask(environ, start_response)
        return endpoint(environ, start_response)
