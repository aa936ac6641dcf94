"""The JSON envelope of SPEC §4 and the error codes every JSON route answers with."""

from __future__ import annotations

import time
from enum import Enum
from typing import Any

from flask import Flask, Response, current_app, jsonify, request
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError
from sqlalchemy.exc import DisconnectionError, InterfaceError, OperationalError
from werkzeug.exceptions import BadRequest, HTTPException, MethodNotAllowed

from app import errors
from app.errors import DomainError
from app.redis_connection import ReplicaNotConfirmed
from app.wire import query_is_utf8

# Failures of what the service stands on, not of the request: answered 503 so clients retry.
DEPENDENCY_ERRORS = (OperationalError, InterfaceError, DisconnectionError,
                     RedisConnectionError, RedisTimeoutError, ReplicaNotConfirmed)


class ErrorCode(Enum):
    """(code, HTTP status) pairs of SPEC §4."""

    UNAUTHORIZED = (1001, 401)
    FORBIDDEN = (1002, 403)
    PARAM_INVALID = (2001, 400)
    MODEL_NOT_FOUND = (3003, 400)
    MEMORY_ITEM_NOT_FOUND = (3033, 404)
    MEMORY_CONTENT_INVALID = (3034, 400)
    MEMORY_CONTENT_DUPLICATE = (3035, 409)
    MEMORY_LIMIT_EXCEEDED = (3036, 409)
    MEMORY_VERSION_CONFLICT = (3037, 412)
    MEMORY_CONTENT_SECRET = (3038, 400)
    INTERNAL_ERROR = (5001, 500)

    @property
    def code(self) -> int:
        return self.value[0]

    @property
    def http_status(self) -> int:
        return self.value[1]


class ApiError(Exception):
    """A refusal of the web layer itself (authentication, signature, CSRF): one envelope error.

    What the domain refuses is a `DomainError`; `from_domain` gives it its envelope error.
    """

    def __init__(self, error: ErrorCode, message: str, http_status: int | None = None,
                 reason: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.http_status = http_status or error.http_status
        self.reason = reason or error.name.lower()

    @classmethod
    def from_domain(cls, exc: DomainError) -> ApiError:
        """The envelope error of a domain refusal: the one table from kinds to SPEC §4 codes."""
        for kind, error in DOMAIN_ERRORS:
            if isinstance(exc, kind):
                return cls(error, exc.message, reason=exc.reason)
        raise TypeError(f"no envelope code for {type(exc).__name__}")


DOMAIN_ERRORS: tuple[tuple[type[DomainError], ErrorCode], ...] = (
    (errors.InvalidInput, ErrorCode.PARAM_INVALID),
    (errors.InvalidContent, ErrorCode.MEMORY_CONTENT_INVALID),
    (errors.SecretContent, ErrorCode.MEMORY_CONTENT_SECRET),
    (errors.MemoryNotFound, ErrorCode.MEMORY_ITEM_NOT_FOUND),
    (errors.DuplicateContent, ErrorCode.MEMORY_CONTENT_DUPLICATE),
    (errors.LimitReached, ErrorCode.MEMORY_LIMIT_EXCEEDED),
    (errors.VersionConflict, ErrorCode.MEMORY_VERSION_CONFLICT),
    (errors.UnknownModel, ErrorCode.MODEL_NOT_FOUND),
    (errors.NotEditable, ErrorCode.FORBIDDEN),
)


def _now_ms() -> int:
    return int(time.time() * 1000)


def ok(data: Any = None, status: int = 200) -> tuple[Response, int]:
    """A success envelope."""
    return jsonify({"code": 0, "message": "success", "data": data, "timestamp": _now_ms()}), status


def ok_body(data_json: str) -> str:
    """The text of a success envelope around `data` already encoded as JSON: byte for byte what
    `ok` would send for it (same separators, key order and trailing newline)."""
    return f'{{"code":0,"message":"success","data":{data_json},"timestamp":{_now_ms()}}}\n'


def ok_encoded(data_json: str, status: int = 200) -> Response:
    """A success envelope around `data` already encoded as JSON (`ok_body`)."""
    return current_app.response_class(ok_body(data_json), status=status,
                                      mimetype="application/json")


def failure(error: ErrorCode, message: str) -> dict[str, Any]:
    """The body of a failure envelope: no `data` key at all."""
    return {"code": error.code, "message": message, "timestamp": _now_ms()}


def fail(error: ErrorCode, message: str, http_status: int | None = None) -> tuple[Response, int]:
    """A failure envelope."""
    return jsonify(failure(error, message)), http_status or error.http_status


def conflict(message: str, current: dict[str, Any], version: int) -> Response:
    """A 412 MEMORY_VERSION_CONFLICT: the one failure envelope that carries `data` — the item as
    it is now — with its `ETag`, so the client can show it and send its change again on it."""
    body = {**failure(ErrorCode.MEMORY_VERSION_CONFLICT, message), "data": current}
    response = jsonify(body)
    response.status_code = ErrorCode.MEMORY_VERSION_CONFLICT.http_status
    response.set_etag(str(version))
    return response


def refusal(exc: Exception, path: str, logger: Any) -> tuple[ErrorCode, str, int]:
    """The envelope error, message and HTTP status of any exception a JSON route met — the one
    table every JSON answer uses, Flask's handlers and the hot paths' endpoints alike. Logs
    what is not the client's doing (a dependency down, a bug)."""
    if isinstance(exc, DomainError):
        exc = ApiError.from_domain(exc)
    if isinstance(exc, ApiError):
        return exc.error, exc.message, exc.http_status
    if isinstance(exc, HTTPException):
        status = exc.code or 500
        if status >= 500:
            return ErrorCode.INTERNAL_ERROR, "internal error", status
        # 404/405/413 keep their HTTP status so clients can tell "no such route" from bad input.
        return _HTTP_TO_ERROR.get(status, ErrorCode.PARAM_INVALID), exc.description or exc.name, \
            status
    if isinstance(exc, DEPENDENCY_ERRORS):
        logger.warning("event=request.dependency_unavailable path=%s error=%s", path,
                       type(exc).__name__)
        return ErrorCode.INTERNAL_ERROR, "a dependency is unavailable, retry later", 503
    logger.exception("event=request.unhandled_error path=%s", path, exc_info=exc)
    return ErrorCode.INTERNAL_ERROR, "internal error", 500


def wants_envelope() -> bool:
    """JSON routes (and anything under /api/) answer errors in the envelope."""
    return request.path.startswith("/api/") or request.path == "/metrics"


_HTTP_TO_ERROR = {
    401: ErrorCode.UNAUTHORIZED,
    403: ErrorCode.FORBIDDEN,
}


def _refuse_undecodable_query() -> None:
    """A query string that is not UTF-8, raw or percent-decoded, is the client's error: werkzeug
    would raise a UnicodeDecodeError (a 500) at the first look at `request.args`, or put U+FFFD
    for `%FF` and answer as if the client had sent it. Checked before any view (2001)."""
    if not query_is_utf8(request.environ.get("QUERY_STRING", "")):
        raise BadRequest("the query string is not valid UTF-8")


def with_allow(response: Response, exc: HTTPException) -> Response:
    """A 405 says which methods the address takes (`Allow`, RFC 9110): werkzeug puts it on its
    own answer, and an error handler that builds another must carry it over."""
    if isinstance(exc, MethodNotAllowed) and exc.valid_methods:
        response.headers["Allow"] = ", ".join(exc.valid_methods)
    return response


def register_error_handlers(app: Flask) -> None:
    """Render every error under /api/ as an envelope; never leak a traceback."""
    app.before_request(_refuse_undecodable_query)

    @app.errorhandler(ApiError)
    def handle_api_error(exc: ApiError):
        return fail(exc.error, exc.message, exc.http_status)

    @app.errorhandler(DomainError)
    def handle_domain_error(exc: DomainError):
        return handle_api_error(ApiError.from_domain(exc))

    @app.errorhandler(HTTPException)
    def handle_http_exception(exc: HTTPException):
        if not wants_envelope():
            return exc
        error, message, status = refusal(exc, request.path, app.logger)
        response, status = fail(error, message, status)
        return with_allow(response, exc), status

    @app.errorhandler(Exception)
    def handle_unexpected(exc: Exception):
        error, message, status = refusal(exc, request.path, app.logger)
        if not wants_envelope():
            return Response("Service Unavailable" if status == 503 else "Internal Server Error",
                            status=status, mimetype="text/plain")
        return fail(error, message, status)
