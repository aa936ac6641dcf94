"""The login page: where it leads after a successful login."""

from __future__ import annotations


def test_login_returns_to_the_page_asked_for(users, pages):
    users.user("auditor", grants=("memory:read",))
    response = pages.login("auditor", next_url="/admin/memory?q=a")
    assert response.headers["Location"] == "/admin/memory?q=a"


def test_login_lands_on_my_memory_by_default(users, pages):
    users.user("alice")
    assert pages.login("alice").headers["Location"] == "/settings/memory"
