"""Every error path answers the SPEC §4 envelope; no 500 for something a client did."""

from tests.conftest import SERVICE_TOKEN, assert_error


def _result(response):
    return response.status_code, response.get_json()


def test_unknown_api_route_is_an_envelope_404(client):
    assert_error(_result(client.get("/api/v1/nope")), 404, 2001)


def test_wrong_method_is_an_envelope_405(alice):
    assert_error(alice.put("/api/v1/memory", {}), 405, 2001)


def test_oversized_body_is_an_envelope_413(alice, memories):
    body = '{"scope": "USER", "content": "' + "x" * (1024 * 1024 + 10) + '"}'
    result = alice.call("POST", "/api/v1/memory", data=body,
                        headers={"Content-Type": "application/json"})
    assert_error(result, 413, 2001)
    assert memories.count() == 0


def test_success_envelope_shape(alice):
    status, body = alice.get("/api/v1/memory/settings")
    assert status == 200
    assert set(body) == {"code", "message", "data", "timestamp"}
    assert (body["code"], body["message"]) == (0, "success")


def test_database_down_is_503_envelope(make_app, users):
    app = make_app(SQLALCHEMY_DATABASE_URI="mysql+pymysql://root@127.0.0.1:1/none",
                   SQLALCHEMY_ENGINE_OPTIONS={"connect_args": {"connect_timeout": 1}})
    response = app.test_client().get(
        "/api/v1/internal/memory/context?userId=1",
        headers={"Authorization": "Bearer test-service-token"})
    assert_error(_result(response), 503, 5001)


def test_a_query_string_that_is_not_utf8_is_a_400_not_a_500(client):
    """A raw 0xFF byte in the query, as a WSGI server hands it over (latin-1 text)."""
    for path in ("/api/v1/internal/memory/context", "/api/v1/memory"):
        response = client.get(path, headers={"Authorization": f"Bearer {SERVICE_TOKEN}",
                                             "X-User-Id": "1"},
                              environ_overrides={"QUERY_STRING": "userId=1&projectKey=\xff"})
        assert_error(_result(response), 400, 2001)
