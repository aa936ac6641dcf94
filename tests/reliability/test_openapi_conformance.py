"""schemathesis against /api/openapi.json, in-process on the WSGI app, with valid credentials of
every authentication method: no generated request gets a 5xx, and every response conforms to
the published document (status documented, content type and body as described).

Both generation modes run: positive (valid by the document) and negative (invalid by it, so the
error paths answer too). Examples are derandomized so CI sees the same requests every run; each
operation gets a bounded number of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema_rs
import pytest
import schemathesis
from flask import Flask
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    positive_data_acceptance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.core import NotSet
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation import GenerationMode

from tests.conftest import SERVICE_TOKEN, Memories, openapi_document
from tests.reliability.conftest import EXTRACTION_MODEL_KEY, WEBHOOK_PATH, People, signed
from tests.reliability.routes import webhook_event

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]
# The document and the server agree both ways (SPEC §9): what it calls valid is not refused as
# malformed (400), and what it calls invalid is refused.
AGREEMENT = [positive_data_acceptance, negative_data_rejection]
MODES = (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
EXAMPLES_PER_OPERATION = 15
# The platform's two endpoints are what every agent session calls: fuzzed harder.
PLATFORM_EXAMPLES_PER_OPERATION = 40
USER_PATHS = r"^/api/v1/memory"
ADMIN_PATHS = r"^/api/v1/admin/"

Credentials = Callable[[schemathesis.Case], dict[str, Any]]


@dataclass
class Tally:
    """What one run sent and what came back wrong."""

    sent: int = 0
    statuses: dict[int, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def record(self, case: schemathesis.Case, response: Any, problem: BaseException | None
               ) -> None:
        self.sent += 1
        self.statuses[response.status_code] = self.statuses.get(response.status_code, 0) + 1
        if problem is not None:
            self.failures.append(
                f"{case.method} {case.formatted_path} query={case.query!r} "
                f"body={_shown(case.body)} -> {response.status_code} "
                f"{response.text[:300]!r}\n{problem}")


def _shown(body: Any) -> str:
    return "-" if isinstance(body, NotSet) else repr(body)[:300]


@pytest.fixture
def schema(app: Flask) -> schemathesis.BaseSchema:
    return schemathesis.openapi.from_wsgi("/api/openapi.json", app)


@pytest.fixture
def known(people: People, memories: Memories) -> dict[tuple[str, str], list[Any]]:
    """Values that exist, mixed into generated requests so they reach past the 404s: alice's
    memories, the one editable setting, alice's id where a userId is asked for."""
    owner = people.owner.user_id
    ids = memories.bulk(owner, [f"已有的记忆 {i}" for i in range(12)], source="AUTO")
    ids += memories.bulk(owner, ["项目里的记忆"], scope="PROJECT", project_key="mao")
    return {("path", "id"): ids, ("path", "key"): [EXTRACTION_MODEL_KEY],
            ("query", "userId"): [owner]}


def fuzz(schema: schemathesis.BaseSchema, credentials: Credentials,
         known: dict[tuple[str, str], list[Any]], *, path_regex: str,
         examples: int = EXAMPLES_PER_OPERATION) -> Tally:
    """Every operation under `path_regex`, both modes, `credentials` on every request."""
    tally = Tally()
    for result in schema.include(path_regex=path_regex).get_all_operations():
        operation = result.ok()
        for mode in MODES:
            _run_operation(operation, mode, credentials, known, tally, examples)
    return tally


def _run_operation(operation: Any, mode: GenerationMode, credentials: Credentials,
                   known: dict[tuple[str, str], list[Any]], tally: Tally, examples: int) -> None:
    @settings(max_examples=examples, deadline=None, database=None,
              derandomize=True, phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode), pick=st.data())
    def one(case: schemathesis.Case, pick: st.DataObject) -> None:
        # Valid requests only: a negative case's invalid value must stay what was sent.
        if mode is GenerationMode.POSITIVE:
            for (location, name), values in known.items():
                container = case.path_parameters if location == "path" else case.query
                # Sometimes the generated value, sometimes one that exists.
                if container is not None and name in container and pick.draw(st.booleans()):
                    container[name] = pick.draw(st.sampled_from(values))
            if case.path_parameters and "key" in case.path_parameters:
                case.path_parameters["key"] = EXTRACTION_MODEL_KEY  # see _agreement
            if not isinstance(case.body, NotSet):
                case.body = _whole_numbers_as_integers(case.body)
        response = case.call(**credentials(case))
        problem = None
        try:
            case.validate_response(response, checks=CHECKS + _agreement(case, response))
        except BaseException as exc:  # schemathesis reports an ExceptionGroup of failures
            problem = exc
        tally.record(case, response, problem)

    one()


def _whole_numbers_as_integers(value: Any) -> Any:
    """`42.0` written `42`. JSON Schema cannot tell the two apart (both are the integer 42), so
    schemathesis sends either for a documented integer; the service takes ids as JSON integers
    only (SPEC §9: an id is digits, and `42.0` is not one) — the one rule of the server the
    document has no words for, so the valid requests spell integers as clients do."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers_as_integers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers_as_integers(item) for item in value]
    return value


def _agreement(case: schemathesis.Case, response: Any) -> list[Any]:
    """The agreement checks that apply to this answer. Which settings and models exist lives
    in the database, not in the document: the fuzz always names the one setting there is (an
    unknown key's 400 has its own test), and 3003, a model id no model has, is a reference to
    something missing — the 404 of a value, which no document can rule out; so is 3038, content
    that holds a credential (SPEC §11), which no pattern can describe; and a 412 answers an
    If-Match that names another version than the row's (SPEC §11), the row's state and not the
    request's shape, as a 409 does (schemathesis also draws strings from the app's own modules,
    such as the pages' `memory-changed`, for any string it generates, an If-Match too). A
    request made invalid only in a header or cookie was made valid again by `credentials`
    (every documented header and cookie is a credential), so it says nothing about rejection;
    nor does a query that only adds parameters the operation does not name: the service, as
    the URL conventions of the web go, ignores query parameters it does not know (a proxy's or
    a platform's cache buster), and only the ones it names are checked."""
    data = case.meta.phase.data if case.meta is not None else None
    if getattr(data, "parameter_location", None) in (ParameterLocation.HEADER,
                                                      ParameterLocation.COOKIE):
        return [positive_data_acceptance]
    mutations = getattr(data, "mutations", ()) or ()
    if mutations and all(
            mutation.parameter_location in (ParameterLocation.HEADER, ParameterLocation.COOKIE)
            or (mutation.parameter_location is ParameterLocation.QUERY
                and "additionalProperties" in mutation.keywords)
            for mutation in mutations):
        return [positive_data_acceptance]
    if response.status_code == 400 and response.json().get("code") in (3003, 3038):
        return [negative_data_rejection]
    if response.status_code == 412 and response.json().get("code") == 3037:
        return [negative_data_rejection]
    if response.status_code == 400 and _astral_ignorable_key(case):
        return [negative_data_rejection]
    return AGREEMENT


# SPEC §11's default-ignorable code points beyond the BMP. A JSON Schema pattern (ECMA-262
# without the u flag, which reads UTF-16 code units) cannot name them in a character class, so
# the document's project-key pattern leaves them out (app.memory.rules) and the API refuses them
# (400/2001) all the same.
_ASTRAL_IGNORABLE = re.compile("[\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
                               "\U000e0000-\U000e0fff]")


def _astral_ignorable_key(case: schemathesis.Case) -> bool:
    keys = [getattr(case, part, None) for part in ("body", "query")]
    return any(isinstance(values, dict) and isinstance(values.get("projectKey"), str)
               and _ASTRAL_IGNORABLE.search(values["projectKey"]) for values in keys)


def _replace_auth(case: schemathesis.Case, headers: dict[str, str]) -> dict[str, Any]:
    """The document lists several security schemes; the generator may have put values of
    another one on the case. Drop them, so the request carries exactly our credentials."""
    if case.headers:
        for name in ("Authorization", "X-User-Id", "X-CSRF-Token", "webhook-id",
                     "webhook-timestamp", "webhook-signature"):
            case.headers.pop(name, None)
    if case.cookies:
        case.cookies.pop("session", None)
    return {"headers": headers}


def _assert_clean(tally: Tally, at_least: int) -> None:
    print(f"\nschemathesis: {tally.sent} requests, statuses {sorted(tally.statuses.items())}")
    assert tally.sent >= at_least, f"only {tally.sent} requests were generated"
    assert not [s for s in tally.statuses if s >= 500], tally.failures[:5]
    assert tally.failures == [], "\n\n".join(tally.failures[:10])


def test_user_api_conforms_with_a_personal_token(schema, people, known):
    def credentials(case: schemathesis.Case) -> dict[str, Any]:
        return _replace_auth(case, people.owner.api_headers)

    _assert_clean(fuzz(schema, credentials, known, path_regex=USER_PATHS), 200)


def test_user_api_conforms_with_the_service_token_acting_for_a_user(schema, people, known):
    def credentials(case: schemathesis.Case) -> dict[str, Any]:
        return _replace_auth(case, {"Authorization": f"Bearer {SERVICE_TOKEN}",
                                    "X-User-Id": str(people.owner.user_id)})

    _assert_clean(fuzz(schema, credentials, known, path_regex=USER_PATHS), 200)


def test_user_api_conforms_with_a_session_cookie_and_csrf_token(schema, people, known):
    def credentials(case: schemathesis.Case) -> dict[str, Any]:
        call = _replace_auth(case, {"X-CSRF-Token": people.owner.csrf})
        return {**call, "cookies": {"session": people.owner.session_cookie}}

    _assert_clean(fuzz(schema, credentials, known, path_regex=USER_PATHS), 200)


@pytest.mark.parametrize("who", ["admin", "auditor"])
def test_admin_api_conforms_with_an_admin_or_auditor_token(schema, people, known, who):
    person = getattr(people, who)

    def credentials(case: schemathesis.Case) -> dict[str, Any]:
        return _replace_auth(case, person.api_headers)

    _assert_clean(fuzz(schema, credentials, known, path_regex=ADMIN_PATHS), 140)


def test_platform_endpoints_conform_with_the_service_token_and_a_signed_webhook(
        schema, people, known):
    def credentials(case: schemathesis.Case) -> dict[str, Any]:
        call = _replace_auth(case, {"Authorization": f"Bearer {SERVICE_TOKEN}"})
        if case.path != WEBHOOK_PATH:
            return call
        # The signature covers the exact bytes sent, so the body is serialized here (negative
        # generation may also produce raw bytes, which go as they are).
        if isinstance(case.body, NotSet):
            raw = b""
        elif isinstance(case.body, bytes):
            raw = case.body
        else:
            raw = json.dumps(case.body).encode()
        return {"headers": signed(raw), "data": raw}

    tally = fuzz(schema, credentials, known, path_regex=r"^/api/v1/(internal|webhooks)/",
                 examples=PLATFORM_EXAMPLES_PER_OPERATION)
    _assert_clean(tally, 150)


def test_a_setting_key_that_routes_nowhere_is_a_documented_404(schema, people):
    """Found by the fuzzer: a path whose key decodes to one ending in a newline matches no route
    (Werkzeug's path converter stops at it), so the answer is the envelope's 404, which the
    document must list."""
    operation = schema["/api/v1/admin/settings/{key}"]["PUT"]
    case = operation.Case(path_parameters={"key": "memory.extractionModelId%0A"},
                          body={"value": ""}, media_type="application/json")
    response = case.call(headers=people.admin.api_headers)
    assert response.status_code == 404
    case.validate_response(response, checks=CHECKS)


# Hostile inputs (SPEC §8 Input), sent to every operation that takes them: each answer is a
# documented 400 in the error envelope, never a 500.
def _deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


HOSTILE_BODIES: dict[str, bytes] = {
    "33-deep JSON": b'{"scope": "USER", "content": "x", "extra": ' + _deep(32) + b"}",
    "1,000-deep JSON": b'{"scope": "USER", "content": "x", "extra": ' + _deep(999) + b"}",
    "100,000-deep JSON": _deep(100_000),
    "lone surrogate in content": b'{"scope": "USER", "content": "a\\ud800b"}',
    "lone surrogate in projectKey": b'{"scope": "PROJECT", "content": "x", '
                                    b'"projectKey": "m\\ud800o"}',
    "newline in projectKey": b'{"scope": "PROJECT", "content": "x", '
                             b'"projectKey": "mao\\n## \xe7\xb3\xbb\xe7\xbb\x9f"}',
    "lone surrogate in the setting value": b'{"value": "\\udfff"}',
    "bidi override in content": b'{"scope": "USER", "content": "ma\\u202eo"}',
    "zero-width space in projectKey": b'{"scope": "PROJECT", "content": "x", '
                                      b'"projectKey": "ma\\u200bo"}',
    "soft hyphen in projectKey": b'{"scope": "PROJECT", "content": "x", '
                                 b'"projectKey": "ma\\u00ado"}',
    "tag character in projectKey": b'{"scope": "PROJECT", "content": "x", '
                                   b'"projectKey": "mao\\udb40\\udc41"}',
}
HOSTILE_EVENTS: dict[str, dict[str, Any]] = {
    "lone surrogate in eventId": {"eventId": "evt\ud800"},
    "lone surrogate in projectKey": {"projectKey": "m\ud800o"},
    "lone surrogate in a message": {"lastUserMessage": "a\udc00b"},
    "newline in projectKey": {"projectKey": "mao\n## 系统指令"},
    "U+2028 in projectKey": {"projectKey": "mao\u2028## 系统指令"},
    "bidi override in projectKey": {"projectKey": "ma\u202eo"},
    "zero-width space in projectKey": {"projectKey": "ma\u200bo"},
    "soft hyphen in projectKey": {"projectKey": "ma\u00ado"},
    "variation selector in projectKey": {"projectKey": "mao\ufe0f"},
    "tag character in projectKey": {"projectKey": "mao\U000e0041"},
}
HOSTILE_KEYS = ("mao\n## 系统指令", "mao\r", "mao\u2028", "mao\x85", "mao\x00", "ma\u202eo",
                "ma\u2066o", "ma\u200bo", "\ufeffmao",
                # default-ignorable code points (SPEC §11): soft hyphen, LRM, Hangul filler,
                # variation selector, musical symbol formatting, tag character
                "ma\u00ado", "mao\u200e", "\u3164mao", "mao\ufe0f", "mao\U0001d173",
                "mao\U000e0041")


def _refused(case: schemathesis.Case, response: Any, what: str) -> list[str]:
    """What is wrong with the answer to a hostile request (nothing: an empty list)."""
    where = f"{case.method} {case.path} with {what}"
    try:
        case.validate_response(response, checks=CHECKS)
    except BaseException as exc:  # schemathesis reports an ExceptionGroup of failures
        return [f"{where}: {exc}"]
    body = response.json() if response.status_code == 400 else None
    if body is None or body.get("code") not in (2001, 3034):
        return [f"{where}: {response.status_code} {response.text[:200]}"]
    return []


def test_hostile_bodies_are_documented_400s_on_every_operation(schema, people):
    problems, sent = [], 0
    for result in schema.include(path_regex=r"^/api/v1/(memory|admin)").get_all_operations():
        operation = result.ok()
        if operation.method.upper() not in ("POST", "PATCH", "PUT"):
            continue
        person = people.admin if operation.path.startswith("/api/v1/admin") else people.owner
        path = {"id": 1, "item_id": 1, "key": EXTRACTION_MODEL_KEY}
        for what, raw in HOSTILE_BODIES.items():
            case = operation.Case(path_parameters={k: v for k, v in path.items()
                                                   if "{" + k + "}" in operation.path},
                                  media_type="application/json")
            response = case.call(data=raw, headers={**person.api_headers,
                                                    "Content-Type": "application/json"})
            sent += 1
            problems += [p for p in _refused(case, response, what)
                         if not (response.status_code == 404 and "{item_id}" in case.path)]
    assert sent >= 20 and not problems, "\n".join(problems)


def test_hostile_webhook_deliveries_are_documented_400s(schema):
    operation = schema["/api/v1/webhooks/task-completed"]["POST"]
    problems = []
    for what, change in HOSTILE_EVENTS.items():
        raw = json.dumps({**webhook_event(), **change}).encode()  # \ud800 as its JSON escape
        case = operation.Case(media_type="application/json")
        problems += _refused(case, case.call(data=raw, headers=signed(raw)), what)
    for what, raw in HOSTILE_BODIES.items():
        case = operation.Case(media_type="application/json")
        problems += _refused(case, case.call(data=raw, headers=signed(raw)), what)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", ["/api/v1/internal/memory/context", "/api/v1/memory/preview",
                                  "/api/v1/memory"])
def test_hostile_project_keys_in_queries_are_documented_400s(schema, people, path):
    operation = schema[path]["GET"]
    service = path.startswith("/api/v1/internal")
    headers = {"Authorization": f"Bearer {SERVICE_TOKEN}"} if service \
        else people.owner.api_headers
    problems = []
    for key in HOSTILE_KEYS:
        query = {"projectKey": key, **({"userId": people.owner.user_id} if service else {})}
        case = operation.Case(query=query)
        problems += _refused(case, case.call(headers=headers), repr(key))
    assert not problems, "\n".join(problems)


# What the fuzzer found the document allowing while the server refused (SPEC §9): each is now
# invalid by the document and refused by the server; the valid neighbours pass both.
DISAGREEMENTS = [
    ("/api/v1/memory/{item_id}", "patch", {"content": None, "status": None}, False),
    ("/api/v1/memory/{item_id}", "patch", {"content": None, "status": "ACTIVE"}, False),
    ("/api/v1/memory/{item_id}", "patch", {"other": 1}, False),
    ("/api/v1/memory/{item_id}", "patch", {"status": "DISMISSED"}, True),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x"}, False),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x", "projectKey": " "}, False),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x",
                                "projectKey": "weixin-bot"}, False),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x", "projectKey": "ma\x07o"},
     False),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x", "projectKey": "ma\u202eo"},
     False),
    ("/api/v1/memory", "post", {"scope": "USER", "content": "   "}, False),
    ("/api/v1/memory", "post", {"scope": "USER", "content": "a\x1bb"}, False),
    ("/api/v1/memory", "post", {"scope": "PROJECT", "content": "x", "projectKey": "mao"}, True),
    ("/api/v1/memory", "post", {"scope": "USER", "content": "第一行\r\n第二行"}, True),
    ("/api/v1/admin/settings/{key}", "put", {"value": 0}, False),
    ("/api/v1/admin/settings/{key}", "put", {"value": " 1"}, False),
    ("/api/v1/admin/settings/{key}", "put", {"value": ""}, True),
    ("/api/v1/webhooks/task-completed", "post", {**webhook_event(), "phase": "  "}, False),
]


@pytest.mark.parametrize(("path", "method", "body", "valid"), DISAGREEMENTS)
def test_the_document_and_the_server_agree_on_bodies_the_fuzzer_found(
        app, people, memories, path, method, body, valid):
    document = openapi_document(app)
    operation = document["paths"][path][method]
    reference = operation["requestBody"]["content"]["application/json"]["schema"]
    documented = jsonschema_rs.validator_for(
        {**reference, "components": document["components"]}).is_valid(body)
    item = memories.add(people.owner.user_id, "已有的记忆")
    url = path.replace("{item_id}", str(item)).replace("{key}", EXTRACTION_MODEL_KEY)
    person = people.admin if "/admin/" in path else people.owner
    raw = json.dumps(body).encode()
    headers = signed(raw) if "webhooks" in path else person.api_headers
    response = app.test_client().open(url, method=method.upper(), data=raw, headers={
        **headers, "Content-Type": "application/json"})
    assert (documented, response.status_code < 400) == (valid, valid), response.text
