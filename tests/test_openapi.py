"""The published OpenAPI document covers every JSON route (SPEC §4)."""

import re

from tests.conftest import openapi_document

IGNORED_METHODS = {"HEAD", "OPTIONS"}


def _shape(path: str) -> str:
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path)


def _documented(app) -> set[tuple[str, str]]:
    return {(_shape(path), method.upper())
            for path, item in openapi_document(app)["paths"].items() for method in item}


def test_every_json_route_is_documented(app):
    documented = _documented(app)
    for rule in app.url_map.iter_rules():
        # The document itself and its interactive page (HTML and its assets) are not JSON routes.
        if not rule.rule.startswith("/api/") or rule.endpoint in {
                "openapi.openapi_json", "openapi.docs", "openapi.docs_asset"}:
            continue
        for method in rule.methods - IGNORED_METHODS:
            assert (_shape(rule.rule), method) in documented, f"{method} {rule.rule}"


def test_every_documented_route_exists(app):
    routes = {(_shape(r.rule), m) for r in app.url_map.iter_rules() for m in r.methods}
    for path, method in _documented(app):
        assert (path, method) in routes, f"{method} {path}"


def test_document_is_served(client):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200
    body = response.get_json()
    assert body["openapi"].startswith("3.")
    assert "/api/v1/memory" in body["paths"]


def test_every_operation_documents_its_success_and_errors(app):
    for path, item in openapi_document(app)["paths"].items():
        for method, operation in item.items():
            codes = set(operation["responses"])
            assert codes & {"200", "201", "202"}, f"{method} {path}"
            assert any(c.startswith(("4", "5")) for c in codes), f"{method} {path}"


METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


def test_a_405_says_which_methods_the_address_takes(app, client):
    """SPEC §9: every method a documented address does not take is 405 with `Allow`, listing
    the documented ones (schemathesis' unsupported_method check)."""
    sent = 0
    for path, item in openapi_document(app)["paths"].items():
        url = re.sub(r"\{[^}]+\}", "1", path)
        documented = {method.upper() for method in item}
        for method in set(METHODS) - documented:
            response = client.open(url, method=method)
            allowed = {m.strip() for m in response.headers.get("Allow", "").split(",")}
            assert response.status_code == 405, f"{method} {url}"
            assert documented <= allowed, f"{method} {url}: Allow {allowed}"
            sent += 1
    assert sent > 20


def test_a_405_page_says_which_methods_the_address_takes(client):
    response = client.delete("/login")
    assert response.status_code == 405 and response.mimetype == "text/html"
    assert {"GET", "POST"} <= {m.strip() for m in response.headers["Allow"].split(",")}


def _memory_operation(app, method: str) -> dict:
    return openapi_document(app)["paths"]["/api/v1/memory/{item_id}"][method]


def test_changes_to_one_memory_document_if_match_and_their_412(app):
    """SPEC §11: PATCH and DELETE take If-Match; a stale one is 412 whose body carries data."""
    schemas = openapi_document(app)["components"]["schemas"]
    for method in ("patch", "delete"):
        operation = _memory_operation(app, method)
        (header,) = [p for p in operation["parameters"] if p["in"] == "header"]
        assert (header["name"], header["required"]) == ("If-Match", False)
        body = operation["responses"]["412"]["content"]["application/json"]["schema"]
        conflict = schemas[body["$ref"].rsplit("/", 1)[1]]
        assert conflict["properties"]["code"]["const"] == 3037
        assert conflict["properties"]["data"] == {"$ref": "#/components/schemas/MemoryItemOut"}
        assert "data" in conflict["required"]


def test_every_answer_with_one_memory_documents_its_etag(app):
    document = openapi_document(app)
    create = document["paths"]["/api/v1/memory"]["post"]["responses"]["201"]
    edit = _memory_operation(app, "patch")["responses"]
    for answer in (create, edit["200"], edit["412"]):
        assert answer["headers"]["ETag"]["required"] is True
    listing = document["paths"]["/api/v1/memory"]["get"]["responses"]["200"]
    assert "headers" not in listing
    assert "version" in document["components"]["schemas"]["MemoryItemOut"]["required"]


def test_every_error_code_is_documented(app):
    """The error envelope's `code` lists every code the service answers with (3038 too)."""
    from app.envelope import ErrorCode

    codes = [schema.get("properties", {}).get("code", {})
             for schema in openapi_document(app)["components"]["schemas"].values()]
    documented = {code for field in codes for code in field.get("enum", ())}
    documented |= {field["const"] for field in codes if "const" in field}
    assert {error.code for error in ErrorCode} <= documented
