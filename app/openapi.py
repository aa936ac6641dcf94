"""The service's own OpenAPI document, served at /api/openapi.json and kept true by a test."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify

bp = Blueprint("openapi", __name__)

JSON = "application/json"


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def envelope(data: dict[str, Any] | None) -> dict[str, Any]:
    """A success envelope whose `data` has the given schema (None: data is null)."""
    return {
        "type": "object",
        "required": ["code", "message", "data", "timestamp"],
        "properties": {
            "code": {"type": "integer", "enum": [0]},
            "message": {"type": "string"},
            "data": data if data is not None else {"type": "null"},
            "timestamp": {"type": "integer"},
        },
    }


def ok_response(data: dict[str, Any] | None, description: str = "success") -> dict[str, Any]:
    return {"description": description, "content": {JSON: {"schema": envelope(data)}}}


def errors(*statuses: int) -> dict[str, Any]:
    """Error responses; every one is the failure envelope (no `data`)."""
    text = {400: "invalid parameter or content", 401: "not authenticated",
            403: "forbidden", 404: "not found", 409: "conflict", 413: "body too large",
            503: "a dependency is down"}
    return {str(s): {"description": text[s], "content": {JSON: {"schema": ref("Error")}}}
            for s in statuses}


def body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": True, "content": {JSON: {"schema": schema}}}


def query(name: str, schema: dict[str, Any], required: bool = False,
          description: str = "") -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "schema": schema,
            "description": description}


ITEM_ID = {"name": "id", "in": "path", "required": True,
           "schema": {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}}
PAGE_PARAMS = [
    query("page", {"type": "integer", "minimum": 1, "maximum": 1_000_000, "default": 1}),
    query("pageSize", {"type": "integer", "minimum": 1, "maximum": 100, "default": 20}),
]
SCOPE = {"type": "string", "enum": ["USER", "PROJECT"]}
STATUS = {"type": "string", "enum": ["ACTIVE", "DISMISSED"]}
USER_SECURITY = [{"session": []}, {"personalToken": []},
                 {"serviceToken": [], "actingUser": []}]
ADMIN_SECURITY = [{"session": []}, {"personalToken": []}]
SERVICE_SECURITY = [{"serviceToken": []}]
WEBHOOK_SECURITY = [{"webhookSignature": [], "webhookTimestamp": []}]
OUTCOME_STATUS = {"type": "string", "enum": ["succeeded", "skipped", "abandoned", "failed"]}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["code", "message", "timestamp"],
        "properties": {
            "code": {"type": "integer",
                     "enum": [1001, 1002, 2001, 3003, 3033, 3034, 3035, 3036, 5001]},
            "message": {"type": "string"},
            "timestamp": {"type": "integer"},
        },
        "not": {"required": ["data"]},
    },
    "MemoryItem": {
        "type": "object",
        "required": ["id", "userId", "scope", "projectKey", "content", "source", "status",
                     "originSessionId", "createdAt", "updatedAt"],
        "properties": {
            "id": {"type": "integer"},
            "userId": {"type": "integer"},
            "scope": SCOPE,
            "projectKey": {"type": ["string", "null"]},
            "content": {"type": "string"},
            "source": {"type": "string", "enum": ["AUTO", "MANUAL", "CONSOLIDATED"]},
            "status": STATUS,
            "originSessionId": {"type": ["integer", "null"]},
            "createdAt": {"type": "string", "format": "date-time"},
            "updatedAt": {"type": "string", "format": "date-time"},
        },
    },
    "MemoryPage": {
        "type": "object",
        "required": ["records", "total", "current", "size"],
        "properties": {
            "records": {"type": "array", "items": ref("MemoryItem")},
            "total": {"type": "integer", "minimum": 0},
            "current": {"type": "integer", "minimum": 1},
            "size": {"type": "integer", "minimum": 1},
        },
    },
    "AutoCapture": {
        "type": "object",
        "required": ["autoCaptureEnabled"],
        "properties": {"autoCaptureEnabled": {"type": "boolean"}},
    },
    "Setting": {
        "type": "object",
        "required": ["key", "value", "category", "description", "editable"],
        "properties": {
            "key": {"type": "string"}, "value": {"type": "string"},
            "category": {"type": "string"}, "description": {"type": "string"},
            "editable": {"type": "boolean"},
        },
    },
    "Model": {
        "type": "object",
        "required": ["id", "name", "model", "isDefault"],
        "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                       "model": {"type": "string"}, "isDefault": {"type": "boolean"}},
    },
    "TaskCompleted": {
        "type": "object",
        "required": ["eventId", "sessionId", "userId", "phase"],
        "properties": {
            "eventId": {"type": "string", "minLength": 1, "maxLength": 128,
                        "description": "Unique per completion; a repeat enqueues nothing."},
            "sessionId": {"type": "integer", "minimum": 1},
            "userId": {"type": "integer", "minimum": 1},
            "projectKey": {"type": ["string", "null"], "maxLength": 255},
            "workspace": {"type": ["string", "null"], "maxLength": 512},
            "sessionType": {"type": ["string", "null"], "maxLength": 32,
                            "description": "SUBAGENT and SIDE_TASK are never extracted."},
            "channel": {"type": ["string", "null"], "maxLength": 32},
            "phase": {"type": "string", "maxLength": 32,
                      "description": "Only COMPLETED is extracted."},
            "lastUserMessage": ref("Message"),
            "lastAssistantMessage": ref("Message"),
        },
    },
    "Message": {
        "description": "A string, or parts of which only the text parts count.",
        "oneOf": [
            {"type": "null"},
            {"type": "string"},
            {"type": "array", "items": {
                "type": "object", "required": ["type"],
                "properties": {"type": {"type": "string"}, "text": {"type": "string"}},
            }},
        ],
    },
    "WebhookAck": {
        "type": "object",
        "required": ["accepted", "enqueued", "reason"],
        "properties": {
            "accepted": {"type": "boolean", "enum": [True]},
            "enqueued": {"type": "boolean"},
            "reason": {"type": "string", "enum": ["enqueued", "phase_not_completed",
                                                  "session_type_excluded",
                                                  "auto_capture_disabled", "duplicate_event"]},
        },
    },
    "JobOutcome": {
        "type": "object",
        "required": ["id", "kind", "jobId", "eventId", "userId", "sessionId", "status",
                     "reason", "attempts", "model", "promptChars", "promptTokens",
                     "completionTokens", "totalTokens", "inserted", "touched", "updated",
                     "dropped", "demoted", "durationMs", "createdAt", "scope", "projectKey",
                     "rowsIn", "rowsOut", "merges", "drops"],
        "properties": {
            "id": {"type": "integer"},
            "kind": {"type": "string"},
            "jobId": {"type": "string"},
            "eventId": {"type": ["string", "null"]},
            "userId": {"type": "integer"},
            "sessionId": {"type": ["integer", "null"]},
            "status": OUTCOME_STATUS,
            "reason": {"type": "string"},
            "attempts": {"type": "integer", "minimum": 1},
            "model": {"type": ["string", "null"]},
            "promptChars": {"type": ["integer", "null"]},
            "promptTokens": {"type": ["integer", "null"]},
            "completionTokens": {"type": ["integer", "null"]},
            "totalTokens": {"type": ["integer", "null"]},
            "inserted": {"type": "integer"}, "touched": {"type": "integer"},
            "updated": {"type": "integer"}, "dropped": {"type": "integer"},
            "demoted": {"type": "integer"},
            "durationMs": {"type": "integer"},
            "createdAt": {"type": "string", "format": "date-time"},
            # Consolidation jobs only (null for extraction): the group and its rows.
            "scope": {"type": ["string", "null"], "enum": ["USER", "PROJECT", None]},
            "projectKey": {"type": ["string", "null"]},
            "rowsIn": {"type": ["integer", "null"]}, "rowsOut": {"type": ["integer", "null"]},
            "merges": {"type": ["integer", "null"]}, "drops": {"type": ["integer", "null"]},
        },
    },
    "OutcomePage": {
        "type": "object",
        "required": ["records", "total", "current", "size"],
        "properties": {
            "records": {"type": "array", "items": ref("JobOutcome")},
            "total": {"type": "integer", "minimum": 0},
            "current": {"type": "integer", "minimum": 1},
            "size": {"type": "integer", "minimum": 1},
        },
    },
    "MemoryEvent": {
        "type": "object",
        "required": ["id", "type", "at", "actor", "sessionId", "before", "after"],
        "properties": {
            "id": {"type": "integer"},
            "type": {"type": "string", "enum": ["CREATED", "EDITED", "TOUCHED", "UPDATED",
                                                "DISMISSED", "RESTORED", "DEMOTED",
                                                "CONSOLIDATED"]},
            "at": {"type": "string", "format": "date-time"},
            "actor": {"type": "string", "enum": ["USER", "EXTRACTION", "CONSOLIDATION"]},
            "sessionId": {"type": ["integer", "null"]},
            "before": {"description": "content before; CONSOLIDATED: the merged contents",
                       "oneOf": [{"type": "null"}, {"type": "string"},
                                 {"type": "array", "items": {"type": "string"}}]},
            "after": {"type": ["string", "null"]},
        },
    },
    "Person": {
        "type": "object", "required": ["id", "username"],
        "properties": {"id": {"type": "integer"}, "username": {"type": ["string", "null"]}},
    },
    "AccessPage": {
        "type": "object",
        "required": ["records", "total", "current", "size"],
        "properties": {
            "records": {"type": "array", "items": {
                "type": "object", "required": ["at", "viewer", "what"],
                "properties": {"at": {"type": "string", "format": "date-time"},
                               "viewer": ref("Person"), "subject": ref("Person"),
                               "what": {"type": "string"}},
            }},
            "total": {"type": "integer", "minimum": 0},
            "current": {"type": "integer", "minimum": 1},
            "size": {"type": "integer", "minimum": 1},
        },
    },
    "MemoryContext": {
        "type": "object",
        "required": ["memories", "prompt"],
        "properties": {
            "memories": {"type": "array", "items": {
                "type": "object",
                "required": ["scope", "projectKey", "content"],
                "properties": {"scope": SCOPE, "projectKey": {"type": ["string", "null"]},
                               "content": {"type": "string"}},
            }},
            "prompt": {"type": "string"},
        },
    },
}

PATHS: dict[str, Any] = {
    "/api/v1/memory": {
        "get": {
            "summary": "List the caller's memories, newest first",
            "tags": ["user"], "security": USER_SECURITY,
            "parameters": [*PAGE_PARAMS, query("scope", SCOPE),
                           query("projectKey", {"type": "string", "maxLength": 128}),
                           query("status", STATUS),
                           query("q", {"type": "string", "maxLength": 500},
                                 description="a case-insensitive substring of the content")],
            "responses": {"200": ok_response(ref("MemoryPage")), **errors(400, 401, 403, 503)},
        },
        "post": {
            "summary": "Create a MANUAL memory",
            "tags": ["user"], "security": USER_SECURITY,
            "requestBody": body({
                "type": "object", "required": ["scope", "content"],
                "properties": {"scope": SCOPE,
                               "content": {"type": "string", "minLength": 1, "maxLength": 500},
                               "projectKey": {"type": ["string", "null"], "maxLength": 128}},
            }),
            "responses": {"201": ok_response(ref("MemoryItem"), "created"),
                          **errors(400, 401, 403, 409, 413, 503)},
        },
    },
    "/api/v1/memory/{id}": {
        "patch": {
            "summary": "Edit content (status kept) and/or switch status",
            "tags": ["user"], "security": USER_SECURITY, "parameters": [ITEM_ID],
            "requestBody": body({
                "type": "object", "minProperties": 1,
                "properties": {"content": {"type": "string", "minLength": 1, "maxLength": 500},
                               "status": STATUS},
            }),
            "responses": {"200": ok_response(ref("MemoryItem")),
                          **errors(400, 401, 403, 404, 409, 413, 503)},
        },
        "delete": {
            "summary": "Delete a memory for good",
            "tags": ["user"], "security": USER_SECURITY, "parameters": [ITEM_ID],
            "responses": {"200": ok_response(None), **errors(400, 401, 403, 404, 503)},
        },
    },
    "/api/v1/memory/settings": {
        "get": {
            "summary": "The auto-capture switch (off when never set)",
            "tags": ["user"], "security": USER_SECURITY,
            "responses": {"200": ok_response(ref("AutoCapture")), **errors(400, 401, 503)},
        },
        "patch": {
            "summary": "Flip auto-capture",
            "tags": ["user"], "security": USER_SECURITY,
            "requestBody": body(ref("AutoCapture")),
            "responses": {"200": ok_response(ref("AutoCapture")),
                          **errors(400, 401, 403, 413, 503)},
        },
    },
    "/api/v1/memory/projects": {
        "get": {
            "summary": "Project keys of the caller's sessions (bot keys excluded), sorted",
            "tags": ["user"], "security": USER_SECURITY,
            "responses": {"200": ok_response({
                "type": "object", "required": ["projects"],
                "properties": {"projects": {"type": "array", "items": {"type": "string"}}},
            }), **errors(400, 401, 503)},
        },
    },
    "/api/v1/admin/memory": {
        "get": {
            "summary": "Audit one user's memories (read-only; needs memory:read)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "parameters": [query("userId", {"type": "integer", "minimum": 1}, required=True),
                           *PAGE_PARAMS, query("scope", SCOPE), query("status", STATUS),
                           query("q", {"type": "string", "maxLength": 500},
                                 description="a case-insensitive substring of the content")],
            "responses": {"200": ok_response(ref("MemoryPage")),
                          **errors(400, 401, 403, 503)},
        },
    },
    "/api/v1/memory/{id}/history": {
        "get": {
            "summary": "The memory's changes, oldest first",
            "tags": ["user"], "security": USER_SECURITY,
            "parameters": [{"name": "id", "in": "path", "required": True,
                            "schema": {"type": "integer"}}],
            "responses": {"200": ok_response({"type": "array", "items": ref("MemoryEvent")}),
                          **errors(401, 404, 503)},
        },
    },
    "/api/v1/memory/preview": {
        "get": {
            "summary": "What the context endpoint answers for the caller and a project key",
            "tags": ["user"], "security": USER_SECURITY,
            "parameters": [query("projectKey", {"type": "string"})],
            "responses": {"200": ok_response(ref("MemoryContext")),
                          **errors(400, 401, 503)},
        },
    },
    "/api/v1/memory/access-log": {
        "get": {
            "summary": "Who read the caller's memories as an auditor, newest first",
            "tags": ["user"], "security": USER_SECURITY,
            "parameters": [*PAGE_PARAMS],
            "responses": {"200": ok_response(ref("AccessPage")), **errors(400, 401, 503)},
        },
    },
    "/api/v1/admin/memory/{id}/history": {
        "get": {
            "summary": "Any user's memory's changes, for audit (needs memory:read)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "parameters": [{"name": "id", "in": "path", "required": True,
                            "schema": {"type": "integer"}}],
            "responses": {"200": ok_response({"type": "array", "items": ref("MemoryEvent")}),
                          **errors(401, 403, 404, 503)},
        },
    },
    "/api/v1/admin/access-log": {
        "get": {
            "summary": "Every audit read of anyone's memories, newest first (admins)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "parameters": [*PAGE_PARAMS],
            "responses": {"200": ok_response(ref("AccessPage")),
                          **errors(400, 401, 403, 503)},
        },
    },
    "/api/v1/admin/settings": {
        "get": {
            "summary": "System settings (admins)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "responses": {"200": ok_response({"type": "array", "items": ref("Setting")}),
                          **errors(401, 403, 503)},
        },
    },
    "/api/v1/admin/settings/{key}": {
        "put": {
            "summary": "Change a setting; memory.extractionModelId takes '' or a model id",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "parameters": [{"name": "key", "in": "path", "required": True,
                            "schema": {"type": "string"}}],
            "requestBody": body({"type": "object", "required": ["value"],
                                 "properties": {"value": {"type": ["string", "integer"]}}}),
            # 404: a key that routes nowhere (one with a newline in it).
            "responses": {"200": ok_response(ref("Setting")),
                          **errors(400, 401, 403, 404, 413, 503)},
        },
    },
    "/api/v1/admin/models": {
        "get": {
            "summary": "Registered LLM models (admins)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "responses": {"200": ok_response({"type": "array", "items": ref("Model")}),
                          **errors(401, 403, 503)},
        },
    },
    "/api/v1/admin/outcomes": {
        "get": {
            "summary": "Background job outcomes, newest first (admins)",
            "tags": ["admin"], "security": ADMIN_SECURITY,
            "parameters": [query("userId", {"type": "integer", "minimum": 1}),
                           query("status", OUTCOME_STATUS),
                           query("kind", {"type": "string", "maxLength": 32},
                                 description="extraction or consolidation"),
                           *PAGE_PARAMS],
            "responses": {"200": ok_response(ref("OutcomePage")),
                          **errors(400, 401, 403, 503)},
        },
    },
    "/api/v1/webhooks/task-completed": {
        "post": {
            "summary": "Report a finished task; extraction is enqueued when D2/D6/D9 allow",
            "description": "X-Memory-Signature is sha256=<hex HMAC-SHA256(secret, "
                           "'<timestamp>.<raw body>')>; the timestamp must be within 300 s. "
                           "503 when MEMORY_WEBHOOK_SECRET is unset or Redis is down.",
            "tags": ["platform"], "security": WEBHOOK_SECURITY,
            "requestBody": body(ref("TaskCompleted")),
            "responses": {"202": ok_response(ref("WebhookAck"), "accepted"),
                          **errors(400, 401, 413, 503)},
        },
    },
    "/api/v1/internal/memory/context": {
        "get": {
            "summary": "Memories and the exact prompt block for a new session",
            "tags": ["platform"], "security": SERVICE_SECURITY,
            "parameters": [query("userId", {"type": "integer", "minimum": 1}, required=True),
                           query("projectKey", {"type": "string"}),
                           query("workspace", {"type": "string"})],
            "responses": {"200": ok_response(ref("MemoryContext")),
                          **errors(400, 401, 503)},
        },
    },
}


def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Memory service",
            "version": "1.0.0",
            "description": "Cross-session long-term memory for agent platforms. Every JSON "
                           "response is the envelope {code, message, data, timestamp}.",
        },
        "paths": PATHS,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                "session": {"type": "apiKey", "in": "cookie", "name": "session",
                            "description": "Login session; unsafe methods also need "
                                           "the X-CSRF-Token header."},
                "personalToken": {"type": "http", "scheme": "bearer",
                                  "description": "A personal API token (users token NAME)."},
                "serviceToken": {"type": "http", "scheme": "bearer",
                                 "description": "MEMORY_SERVICE_TOKEN of the platform."},
                "actingUser": {"type": "apiKey", "in": "header", "name": "X-User-Id",
                               "description": "With the service token: the user to act for."},
                "webhookSignature": {"type": "apiKey", "in": "header",
                                     "name": "X-Memory-Signature",
                                     "description": "sha256=<hex HMAC-SHA256("
                                                    "MEMORY_WEBHOOK_SECRET, "
                                                    "'<timestamp>.<raw body>')>"},
                "webhookTimestamp": {"type": "apiKey", "in": "header",
                                     "name": "X-Memory-Timestamp",
                                     "description": "Unix seconds, within 300 s of now."},
            },
        },
    }


@bp.get("/api/openapi.json")
def openapi_json():
    """This document."""
    return jsonify(document())
