"""Login throttling (SPEC §8 Login and sessions, §9 Accounts): 5 failed logins per account within
15 minutes, then 429 with Retry-After whatever the password until the window passes; an account
is what the database matches the typed name to; a good login clears its count; a per-address
limit that allows more failures; failures logged without the password."""

from __future__ import annotations

import logging

import pytest

from app.auth import throttle
from tests.conftest import PASSWORD
from tests.page_support import login

URL = "/api/v1/memory"


def attempt(client, username="alice", password="wrong"):
    response, _ = login(client, username=username, password=password)
    return response


def test_five_failures_make_every_next_attempt_429_whatever_the_password(client, users):
    users.user("alice")
    assert [attempt(client).status_code for _ in range(5)] == [401] * 5
    response = attempt(client, password=PASSWORD)
    assert response.status_code == 429
    assert 0 < int(response.headers["Retry-After"]) <= 15 * 60
    assert "登录失败次数过多" in response.get_data(as_text=True)
    assert client.get(URL).status_code == 401


def test_the_throttle_lifts_when_the_window_passes(client, users, clock):
    users.user("alice")
    for _ in range(5):
        attempt(client)
        clock.advance(60)
    response = attempt(client, password=PASSWORD)
    assert response.status_code == 429
    # The oldest failure leaves the 15-minute window 10 minutes from now.
    assert int(response.headers["Retry-After"]) == 10 * 60
    clock.advance(10 * 60 - 1)
    assert attempt(client, password=PASSWORD).status_code == 429
    clock.advance(2)
    assert attempt(client, password=PASSWORD).status_code == 302


@pytest.mark.parametrize("spelling", ["ｃａｒｏｌ", "càrol", "cǎrol", "CAROL", " Carol "])
def test_every_spelling_the_database_matches_counts_against_that_account(
        client, users, clock, spelling):
    """utf8mb4_unicode_ci logs each spelling in as carol: none of them is a fresh five guesses."""
    users.user("carol")
    assert attempt(client, username=spelling, password=PASSWORD).status_code == 302
    for name in ("carol", spelling, "carol", spelling, "carol"):
        assert attempt(client, username=name).status_code == 401
    assert attempt(client, username=spelling, password=PASSWORD).status_code == 429
    assert attempt(client, username="carol", password=PASSWORD).status_code == 429


def test_spellings_of_different_accounts_do_not_count_together(client, users, clock):
    users.user("carol")
    users.user("dave")
    for _ in range(5):
        attempt(client, username="ｃａｒｏｌ")
    assert attempt(client, username="dave", password=PASSWORD).status_code == 302


def test_a_successful_login_clears_the_accounts_failures(client, users, clock):
    users.user("alice")
    assert [attempt(client).status_code for _ in range(4)] == [401] * 4
    assert attempt(client, password=PASSWORD).status_code == 302
    assert attempt(client).status_code == 401
    assert attempt(client, password=PASSWORD).status_code == 302


def test_usernames_are_throttled_apart_and_whatever_their_case(client, users):
    users.user("alice")
    users.user("bob")
    for _ in range(5):
        attempt(client, username="alice")
    assert attempt(client, username=" ALICE ").status_code == 429
    assert attempt(client, username="bob", password=PASSWORD).status_code == 302


def test_the_per_address_limit_allows_more_failures_than_the_per_username_one(client, users):
    users.user("zoe")
    names = [f"user{i}" for i in range(5)]
    for name in names:
        assert [attempt(client, username=name).status_code for _ in range(4)] == [401] * 4
    assert attempt(client, username="zoe", password=PASSWORD).status_code == 429
    assert throttle.ADDRESS_FAILURES.amount > throttle.ACCOUNT_FAILURES.amount


def test_every_web_process_sees_the_same_failures(make_app, client, users):
    """Two apps on the same Redis are two gunicorn workers: failures count across both."""
    users.user("alice")
    other_worker = make_app().test_client()
    for _ in range(3):
        attempt(client)
    for _ in range(2):
        attempt(other_worker)
    assert attempt(client, password=PASSWORD).status_code == 429


def test_failures_are_logged_without_the_password(client, users, caplog):
    users.user("alice")
    with caplog.at_level(logging.INFO, logger="app.auth.pages"):
        for _ in range(6):
            attempt(client, password="hunter2-secret")
    text = caplog.text
    assert text.count("event=login.failed") == 5 and "event=login.throttled" in text
    assert "'alice'" in text and "hunter2-secret" not in text


def test_the_five_failing_attempts_answer_as_any_failed_login(client, users):
    users.user("alice")
    for _ in range(5):
        response = attempt(client)
        assert response.status_code == 401
        assert "用户名或密码错误" in response.get_data(as_text=True)
        assert "Retry-After" not in response.headers
