"""Validation and the OpenAPI document, both from the schemas of `app.schemas` (spectree).

A JSON route declares its schemas once, under its authentication decorator so a caller who
may not call it learns nothing about its body:

    @bp.post("")
    @user_api
    @api.validate(resp=answers(201, MemoryItem, errors=(400, 401)), tags=["user"], ...)
    def create_memory(json: NewMemory): ...

A request that does not fit is the usual 400/2001 naming the field (content problems stay 3034,
as the domain says), through the same error handlers as every other refusal (`ServicePlugin`).
The two hot paths are only described here (`described`) and validate with their models
directly.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Any, TypeVar

from flask import Blueprint, abort, current_app, jsonify, render_template
from pydantic import BaseModel, ValidationError

from app.errors import DomainError, InvalidContent, InvalidInput
from app.schemas import Envelope, Error

# spectree renders the three UIs of its offline extra (offapi: 9 MB of JavaScript) into page
# templates as it is imported: 37 MB kept in every process, 54 MB at the peak, 0.1 s of start-up
# — for pages this service never uses (`page_templates={}` below; /api/docs serves offapi's files
# itself). With offapi hidden while spectree is imported, spectree keeps its small online
# templates instead.
_hide_offapi = "offapi" not in sys.modules
if _hide_offapi:
    # None in sys.modules is Python's documented "import fails"; typeshed types it as a module.
    sys.modules["offapi"] = None  # type: ignore[assignment]
try:
    from spectree import Response, SpecTree
    from spectree.plugins.flask_plugin import FlaskPlugin
finally:
    if _hide_offapi:
        del sys.modules["offapi"]

V = TypeVar("V", bound=Callable[..., Any])

USER_SECURITY = [{"session": []}, {"personalToken": []},
                 {"serviceToken": [], "actingUser": []}]
ADMIN_SECURITY = [{"session": []}, {"personalToken": []}]
SERVICE_SECURITY = [{"serviceToken": []}]
# SPEC §5's own headers, or Standard Webhooks' (SPEC §9).
WEBHOOK_SECURITY = [{"webhookSignature": [], "webhookTimestamp": []},
                    {"standardWebhookId": [], "standardWebhookTimestamp": [],
                     "standardWebhookSignature": []}]
SECURITY_SCHEMES = [
    {"name": "session", "data": {
        "type": "apiKey", "field_in": "cookie", "name": "session",
        "description": "Login session; unsafe methods also need the X-CSRF-Token header."}},
    {"name": "personalToken", "data": {
        "type": "http", "scheme": "bearer",
        "description": "A personal API token (users token NAME)."}},
    {"name": "serviceToken", "data": {
        "type": "http", "scheme": "bearer",
        "description": "MEMORY_SERVICE_TOKEN of the platform."}},
    {"name": "actingUser", "data": {
        "type": "apiKey", "field_in": "header", "name": "X-User-Id",
        "description": "With the service token: the user to act for."}},
    {"name": "webhookSignature", "data": {
        "type": "apiKey", "field_in": "header", "name": "X-Memory-Signature",
        "description": "sha256=<hex HMAC-SHA256(MEMORY_WEBHOOK_SECRET, "
                       "'<timestamp>.<raw body>')>"}},
    {"name": "webhookTimestamp", "data": {
        "type": "apiKey", "field_in": "header", "name": "X-Memory-Timestamp",
        "description": "Unix seconds, within 300 s of now."}},
    {"name": "standardWebhookId", "data": {
        "type": "apiKey", "field_in": "header", "name": "webhook-id",
        "description": "Standard Webhooks: the message id; must equal the body's eventId."}},
    {"name": "standardWebhookTimestamp", "data": {
        "type": "apiKey", "field_in": "header", "name": "webhook-timestamp",
        "description": "Standard Webhooks: unix seconds, within 300 s of now."}},
    {"name": "standardWebhookSignature", "data": {
        "type": "apiKey", "field_in": "header", "name": "webhook-signature",
        "description": "Standard Webhooks: v1,<base64 HMAC-SHA256(key, "
                       "'<webhook-id>.<webhook-timestamp>.<raw body>')>, space-separated when "
                       "several; the key is the base64 after whsec_ in MEMORY_WEBHOOK_SECRET, "
                       "else the secret's UTF-8 bytes."}},
]


def domain_error_of(error: ValidationError) -> DomainError:
    """The domain error a schema violation is: 3034 for the content, else 2001 naming the
    field (the first one wrong, in the order the schema lists them)."""
    first = error.errors()[0]
    location = [str(part) for part in first["loc"]]
    if not location:
        return InvalidInput("body_not_object", "request body must be a JSON object")
    if location[0] == "content":
        return InvalidContent("content_type", "content must be a non-empty string")
    field = ".".join(location)
    return InvalidInput(f"{location[0]}_invalid", f"{field}: {first['msg']}")


class ServicePlugin(FlaskPlugin):
    """spectree's Flask plugin, with two differences: a declared JSON body is read whatever its
    Content-Type (as the service always has), through the app's JSON provider and its depth
    limit; and a request that fails validation is refused as a domain error right here —
    spectree's own 422 answer would echo the input, which may not even encode (a lone
    surrogate)."""

    def request_validation(self, request: Any, query: Any, json: Any, form: Any, headers: Any,
                           cookies: Any) -> None:
        try:
            super().request_validation(request, query, None, form, headers, cookies)
            if json is not None:
                body = self.model_adapter.validate_obj(json, request.get_json(force=True,
                                                                              silent=True))
                request.context = request.context._replace(json=body)
        except ValidationError as error:
            raise domain_error_of(error) from None


def _component_name(model: Any) -> str:
    """`Envelope[MemoryPage]` → `EnvelopeMemoryPage`: component names allow no brackets."""
    return re.sub(r"[^A-Za-z0-9_.]", "", getattr(model, "__name__", str(model)))


api = SpecTree(
    backend=ServicePlugin, mode="strict", annotations=True, page_templates={},
    title="Memory service", version="1.0.0",
    description="Cross-session long-term memory for agent platforms. Every JSON response is "
                "the envelope {code, message, data, timestamp}.",
    security_schemes=SECURITY_SCHEMES, validation_error_status=400,
    validation_error_model=Error,
    naming_strategy=_component_name, nested_naming_strategy=lambda _parent, child: child,
)


def answers(status: int, data: Any, *, errors: tuple[int, ...],
            conflict: type[BaseModel] | None = None) -> Response:
    """A success answer of the envelope around `data` (None: data is null), and the error
    statuses the route may give, each the failure envelope — `conflict` the body of its 412."""
    return Response(**{f"HTTP_{status}": Envelope[data]},
                    **{f"HTTP_{code}": Error for code in errors},
                    **({"HTTP_412": conflict} if conflict is not None else {}))


# Answer bodies that come with an ETag (their component names): spectree declares no response
# headers, so `openapi_json` adds them to every answer with one of these bodies.
_WITH_ETAG: set[str] = set()
ETAG_HEADER = {"required": True, "schema": {"type": "string", "pattern": '^"[0-9]+"$'},
               "description": 'The version of the memory in the body, as "<version>": send it '
                              "back as If-Match to change the memory only while it is that "
                              "version."}


def with_etag(*bodies: Any) -> None:
    """Document that every answer whose body is one of `bodies` carries an `ETag`."""
    _WITH_ETAG.update(f"#/components/schemas/{_component_name(body)}" for body in bodies)


def _document() -> dict[str, Any]:
    """spectree's document, with the ETag of every answer that carries one."""
    spec = api.spec
    for item in spec["paths"].values():
        for operation in item.values():
            for answer in operation["responses"].values():
                schema = answer.get("content", {}).get("application/json", {}).get("schema", {})
                if schema.get("$ref") in _WITH_ETAG:
                    answer["headers"] = {"ETag": ETAG_HEADER}
    return spec


def described(view: V, **doc: Any) -> V:
    """Put a hot route in the document without wrapping it: the view stays as it is (no
    per-request work is added), and points at a stand-in that carries the description the way
    spectree finds it (`__wrapped__`)."""
    def stand_in() -> None:
        """Never called: only read for the document."""

    stand_in.__name__, stand_in.__doc__ = view.__name__, view.__doc__
    # spectree reads the document from `__wrapped__`; a view function declares no such attribute.
    view.__wrapped__ = api.validate(skip_validation=True, **doc)(stand_in)  # type: ignore[attr-defined]
    return view


def validated(model: type[BaseModel], data: Any) -> Any:
    """`data` as `model`, or the domain error that refuses it (hot paths, no wrapper)."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise domain_error_of(error) from None


bp = Blueprint("openapi", __name__)


# The files of Swagger UI that spectree's offline extra (the offapi package) bundles, by name.
# Found without importing offapi (its import is what builds the templates); the package is a
# dependency, so its spec and search locations exist (typed as optional).
SWAGGER_UI_FILES = Path(find_spec("offapi").submodule_search_locations[0])  # type: ignore[union-attr,index]
DOCS_ASSETS = {"swagger_bundle.js": "text/javascript", "swagger_preset.js": "text/javascript",
               "swagger_style.css": "text/css"}
DOCS_ASSET_MAX_AGE_S = 24 * 3600


@bp.get("/api/openapi.json")
def openapi_json():
    """This service's OpenAPI document."""
    return jsonify(_document())


@bp.get("/api/docs")
def docs():
    """The interactive API page: Swagger UI on `/api/openapi.json`, every asset served here."""
    return render_template("api_docs.html")


@bp.get("/api/docs/assets/<name>")
def docs_asset(name: str):
    """One file of Swagger UI, from the installed offapi package (spectree's offline UI)."""
    if name not in DOCS_ASSETS:
        abort(404)
    data = (SWAGGER_UI_FILES / name).read_bytes()
    response = current_app.response_class(data,
                                          content_type=f"{DOCS_ASSETS[name]}; charset=utf-8")
    response.cache_control.public = True
    response.cache_control.max_age = DOCS_ASSET_MAX_AGE_S
    return response
