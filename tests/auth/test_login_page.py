"""The login page: where it leads after a successful login, and the username it keeps after an
expired login (never after a logout)."""

from __future__ import annotations

import sqlalchemy as sa

from app.auth.models import LoginSession
from app.extensions import db


def test_login_returns_to_the_page_asked_for(users, pages):
    users.user("auditor", grants=("memory:read",))
    response = pages.login("auditor", next_url="/admin/memory?q=a")
    assert response.headers["Location"] == "/admin/memory?q=a"


def test_login_lands_on_my_memory_by_default(users, pages):
    users.user("alice")
    assert pages.login("alice").headers["Location"] == "/settings/memory"


def test_after_an_expired_login_the_form_keeps_the_username(app, users, pages):
    users.user("alice")
    pages.login("alice")
    with app.app_context():
        db.session.execute(sa.delete(LoginSession))
        db.session.commit()
    html = pages.get(pages.get("/settings/memory").headers["Location"]).text
    assert "登录已过期" in html
    assert 'name="username" value="alice"' in html


def test_after_a_logout_the_form_is_empty(users, pages):
    users.user("alice")
    pages.login("alice")
    pages.client.post("/logout", data={"csrf_token": pages.csrf})
    html = pages.get("/login?expired=1").text
    assert 'name="username" value=""' in html
