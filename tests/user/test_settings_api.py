"""Auto-capture switch (D9) and the projects picker (seed §5.3)."""

import itertools

import pytest

from app.db_types import utcnow
from app.extensions import db
from app.sessions.models import PlatformSession
from tests.conftest import assert_error, assert_ok

SETTINGS = "/api/v1/memory/settings"


def test_auto_capture_is_off_without_a_preference_row(alice):
    assert assert_ok(alice.get(SETTINGS)) == {"autoCaptureEnabled": False}


def test_auto_capture_flips_and_persists(alice):
    assert assert_ok(alice.patch(SETTINGS, {"autoCaptureEnabled": True})) == \
        {"autoCaptureEnabled": True}
    assert assert_ok(alice.get(SETTINGS)) == {"autoCaptureEnabled": True}
    assert_ok(alice.patch(SETTINGS, {"autoCaptureEnabled": False}))
    assert assert_ok(alice.get(SETTINGS)) == {"autoCaptureEnabled": False}


def test_auto_capture_is_per_user(alice, bob):
    assert_ok(alice.patch(SETTINGS, {"autoCaptureEnabled": True}))
    assert assert_ok(bob.get(SETTINGS)) == {"autoCaptureEnabled": False}


@pytest.mark.parametrize("body", [{}, {"autoCaptureEnabled": "true"}, {"autoCaptureEnabled": 1},
                                  {"autoCaptureEnabled": None}])
def test_auto_capture_needs_a_boolean(alice, body):
    assert_error(alice.patch(SETTINGS, body), 400, 2001)
    assert assert_ok(alice.get(SETTINGS)) == {"autoCaptureEnabled": False}


# Session ids are the platform's, unrelated to user ids (which schemathesis can make huge).
_session_ids = itertools.count(1)


def _sessions(app, user_id, keys):
    with app.app_context():
        for key in keys:
            db.session.add(PlatformSession(id=next(_session_ids), user_id=user_id,
                                           project_key=key, last_seen_at=utcnow()))
        db.session.commit()


def test_projects_are_distinct_sorted_session_keys(app, alice):
    _sessions(app, alice.user_id, ["mao", "blog", "mao", None, "", "api"])
    assert assert_ok(alice.get("/api/v1/memory/projects")) == {"projects": ["api", "blog", "mao"]}


def test_projects_leave_out_bot_keys(app, alice):
    _sessions(app, alice.user_id, ["mao", "weixin-bot", "feishu-chat-7-ops"])
    assert assert_ok(alice.get("/api/v1/memory/projects")) == {"projects": ["mao"]}


def test_projects_are_the_callers_own(app, alice, bob):
    _sessions(app, bob.user_id, ["bobs-project"])
    assert assert_ok(alice.get("/api/v1/memory/projects")) == {"projects": []}
