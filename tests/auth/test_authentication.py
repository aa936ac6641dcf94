"""Who may call what: session + CSRF, personal tokens, the service token (SPEC §4)."""


import pytest

from app.auth.models import User
from app.extensions import db
from tests.conftest import PASSWORD, SERVICE_TOKEN, assert_error, assert_ok
from tests.page_support import csrf_from, login

URL = "/api/v1/memory"


@pytest.mark.parametrize(("method", "path"), [
    ("GET", URL), ("POST", URL), ("PATCH", f"{URL}/1"), ("DELETE", f"{URL}/1"),
    ("GET", f"{URL}/settings"), ("PATCH", f"{URL}/settings"), ("GET", f"{URL}/projects"),
])
def test_user_endpoints_need_authentication(client, method, path):
    response = client.open(path, method=method, json={})
    assert response.status_code == 401
    assert response.get_json()["code"] == 1001
    assert "data" not in response.get_json()


@pytest.mark.parametrize("header", ["Bearer mem_not-a-token", "Bearer ", "Basic abc", "Bearer x"])
def test_unknown_or_malformed_token_is_401(client, header):
    response = client.get(URL, headers={"Authorization": header})
    assert (response.status_code, response.get_json()["code"]) == (401, 1001)


def test_personal_token_authenticates_its_owner(alice):
    assert_ok(alice.get(URL))


def test_login_redirects_and_session_reads(client, users):
    users.user("alice")
    response, _ = login(client)
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/settings/memory")
    assert_ok((lambda r: (r.status_code, r.get_json()))(client.get(URL)))


def test_login_with_wrong_password_fails(client, users):
    users.user("alice")
    response, _ = login(client, password="wrong")
    assert response.status_code == 401
    assert client.get(URL).status_code == 401


def test_login_without_csrf_token_is_refused(client, users):
    users.user("alice")
    response = client.post("/login", data={"username": "alice", "password": PASSWORD})
    assert response.status_code == 400
    assert client.get(URL).status_code == 401


def test_login_redirect_stays_on_this_site(client, users):
    users.user("alice")
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"username": "alice", "password": PASSWORD,
                                            "csrf_token": token,
                                            "next": "https://evil.example/steal"})
    assert response.headers["Location"].endswith("/settings/memory")


def test_session_write_without_csrf_token_is_rejected(client, users, memories):
    users.user("alice")
    login(client)
    response = client.post(URL, json={"scope": "USER", "content": "fact"})
    assert (response.status_code, response.get_json()["code"]) == (403, 1002)
    response = client.post(URL, json={"scope": "USER", "content": "fact"},
                           headers={"X-CSRF-Token": "forged"})
    assert (response.status_code, response.get_json()["code"]) == (403, 1002)
    assert memories.count() == 0


def test_login_starts_a_new_session_with_a_new_csrf_token(client, users):
    users.user("alice")
    _, token_before = login(client)
    page = client.get("/settings/memory").get_data(as_text=True)
    assert csrf_from(page) != token_before


def test_session_write_with_csrf_token_is_accepted(client, users):
    users.user("alice")
    login(client)
    token = csrf_from(client.get("/settings/memory").get_data(as_text=True))
    response = client.post(URL, json={"scope": "USER", "content": "fact"},
                           headers={"X-CSRF-Token": token})
    assert response.status_code == 201


def test_logout_is_a_post_with_the_csrf_token_that_ends_the_session(client, users):
    users.user("alice")
    login(client)
    token = csrf_from(client.get("/settings/memory").get_data(as_text=True))
    assert client.post("/logout").status_code == 403
    assert client.get(URL).status_code == 200
    response = client.post("/logout", data={"csrf_token": token})
    assert response.status_code == 302 and response.headers["Location"].endswith("/login")
    assert client.get(URL).status_code == 401


def test_logout_by_get_is_no_route(client, users):
    users.user("alice")
    login(client)
    assert client.get("/logout").status_code == 405
    assert client.get(URL).status_code == 200


def test_token_calls_need_no_csrf_token(alice):
    assert_ok(alice.post(URL, {"scope": "USER", "content": "fact"}), 201)


def test_service_token_acts_for_x_user_id(as_service, alice):
    created = assert_ok(as_service(alice.user_id).post(URL, {"scope": "USER",
                                                             "content": "via platform"}), 201)
    assert created["userId"] == alice.user_id
    assert [r["content"] for r in assert_ok(alice.get(URL))["records"]] == ["via platform"]


def test_a_service_token_write_creates_an_unknown_user(app, as_service):
    assert_ok(as_service(424242).patch(f"{URL}/settings", {"autoCaptureEnabled": False}))
    with app.app_context():
        user = db.session.get(User, 424242)
        assert user is not None and user.username is None and not user.is_admin


@pytest.mark.parametrize("path", [URL, f"{URL}/settings", f"{URL}/projects",
                                  f"{URL}/preview?projectKey=mao", f"{URL}/access-log"])
def test_a_service_token_read_never_creates_a_user(app, as_service, path):
    assert_ok(as_service(9223372036854775807).get(path))
    with app.app_context():
        assert db.session.get(User, 9223372036854775807) is None


def test_service_token_without_x_user_id_is_401(as_service):
    assert_error(as_service().get(URL), 401, 1001)


@pytest.mark.parametrize("user_id", ["abc", "0", "-3", "1.5", str(2**63)])
def test_service_token_with_bad_x_user_id_is_2001(client, user_id):
    response = client.get(URL, headers={"Authorization": f"Bearer {SERVICE_TOKEN}",
                                        "X-User-Id": user_id})
    assert (response.status_code, response.get_json()["code"]) == (400, 2001)


def test_service_token_unset_means_401(make_app, users):
    app = make_app(MEMORY_SERVICE_TOKEN=None)
    response = app.test_client().get(
        "/api/v1/internal/memory/context?userId=1",
        headers={"Authorization": f"Bearer {SERVICE_TOKEN}"})
    assert (response.status_code, response.get_json()["code"]) == (401, 1001)


def test_personal_token_is_stored_hashed(app, users):
    users.user("alice")
    token = users.token("alice")
    with app.app_context():
        stored = db.session.execute(db.text("SELECT token_hash FROM api_token")).scalar_one()
    assert token not in stored and len(stored) == 64
