"""Revocable logins (SPEC §8 Login and sessions): a cookie is dead server-side once its login
session ends — by logout, a password change or the account being disabled — or expires."""

from __future__ import annotations

from datetime import timedelta

import pytest
from flask.testing import FlaskClient

from app.auth import service as accounts
from app.auth.models import LoginSession
from app.extensions import db
from tests.conftest import Accounts
from tests.page_support import csrf_from, login

URL = "/api/v1/memory"


def copy_of(app, client: FlaskClient) -> FlaskClient:
    """Another browser holding a copy of `client`'s session cookie."""
    thief = app.test_client()
    thief.set_cookie("session", client.get_cookie("session").value)
    return thief


def test_a_copied_cookie_is_401_on_the_api_and_redirected_on_pages_after_logout(app, client,
                                                                                 users):
    users.user("alice")
    login(client)
    thief = copy_of(app, client)
    assert thief.get(URL).status_code == 200
    token = csrf_from(client.get("/settings/memory").get_data(as_text=True))
    client.post("/logout", data={"csrf_token": token})
    response = thief.get(URL)
    assert (response.status_code, response.get_json()["code"]) == (401, 1001)
    page = thief.get("/settings/memory")
    assert page.status_code == 302 and "/login" in page.headers["Location"]


def test_a_password_change_ends_every_login_of_the_user(app, client, users, runner):
    users.user("alice")
    login(client)
    other_browser = app.test_client()
    login(other_browser)
    result = runner.invoke(args=["users", "password", "alice", "--password", "new secret"])
    assert result.exit_code == 0, result.output
    assert "2 login(s) ended" in result.output
    assert client.get(URL).status_code == 401
    assert other_browser.get(URL).status_code == 401


def test_disabling_a_user_ends_their_logins_and_refuses_new_ones(app, client, users, runner):
    users.user("alice")
    token = users.token("alice")
    login(client)
    assert runner.invoke(args=["users", "disable", "alice"]).exit_code == 0
    assert client.get(URL).status_code == 401
    response, _ = login(app.test_client())
    assert response.status_code == 401
    assert app.test_client().get(URL, headers={"Authorization": f"Bearer {token}"}) \
        .status_code == 401
    assert runner.invoke(args=["users", "enable", "alice"]).exit_code == 0
    assert login(app.test_client())[0].status_code == 302


def test_a_login_expires_after_the_configured_lifetime(app, make_app):
    app = make_app(PERMANENT_SESSION_LIFETIME=timedelta(hours=2))
    Accounts(app).user("alice")
    client = app.test_client()
    login(client)
    with app.app_context():
        row = db.session.scalar(db.select(LoginSession))
        assert row.expires_at - row.created_at == timedelta(hours=2)
        row.expires_at = row.created_at
        db.session.commit()
    assert client.get(URL).status_code == 401


def test_only_a_hash_of_the_session_id_is_stored(app, client, users):
    users.user("alice")
    login(client)
    cookie = client.get_cookie("session").value
    with app.app_context():
        stored = db.session.scalar(db.select(LoginSession.id_hash))
    assert len(stored) == 64 and stored not in cookie


@pytest.mark.parametrize("command", [["users", "password", "nobody", "--password", "x"],
                                     ["users", "disable", "nobody"]])
def test_account_commands_name_an_existing_user(runner, command):
    result = runner.invoke(args=command)
    assert result.exit_code != 0 and "no user 'nobody'" in result.output


def test_accounts_service_changes_the_password_for_the_next_login(app, client, users):
    users.user("alice")
    with app.app_context():
        accounts.set_password("alice", "new secret")
    response, _ = login(client, password="new secret")
    assert response.status_code == 302


@pytest.mark.parametrize("path", ["/static/app.js", "/static/htmx-2.0.11.min.js",
                                  "/static/app.css", "/favicon.ico"])
def test_static_responses_never_set_the_session_cookie(client, users, path):
    """A cacheable file must not carry one person's session cookie (SPEC §9)."""
    users.user("alice")
    login(client)
    response = client.get(path)
    assert response.status_code == 200
    assert "Set-Cookie" not in response.headers
    response.close()
    # Pages still refresh the login's cookie.
    assert "session=" in client.get("/settings/memory").headers.get("Set-Cookie", "")
