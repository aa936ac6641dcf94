"""Audit transparency (SPEC §8): every audit read is recorded, the subject sees it, admins see
all; and an auditor reads a memory's history."""

from __future__ import annotations

from tests.conftest import assert_error, assert_ok

MEMORIES = "/api/v1/memory"


def reads(api, url: str = f"{MEMORIES}/access-log") -> list[dict]:
    return assert_ok(api.get(url))["records"]


def test_an_audit_read_is_in_the_subjects_access_log_and_nobody_elses(alice, bob, auditor):
    assert_ok(auditor.get(f"/api/v1/admin/memory?userId={alice.user_id}"))
    (record,) = reads(alice)
    assert record["viewer"] == {"id": auditor.user_id, "username": "auditor"}
    assert record["what"] == "memory list"
    assert record["at"].endswith("Z")
    assert reads(bob) == [] and reads(auditor) == []


def test_the_access_log_is_newest_first_and_paged(alice, auditor, memories):
    item_id = memories.add(alice.user_id, "报告用中文")
    assert_ok(auditor.get(f"/api/v1/admin/memory?userId={alice.user_id}"))
    assert_ok(auditor.get(f"/api/v1/admin/memory/{item_id}/history"))
    page = assert_ok(alice.get(f"{MEMORIES}/access-log?pageSize=1"))
    assert (page["total"], page["current"], page["size"]) == (2, 1, 1)
    assert [r["what"] for r in page["records"]] == [f"history of memory #{item_id}"]


def test_the_users_own_reads_are_not_audit_reads(alice, memories):
    item_id = memories.add(alice.user_id, "报告用中文")
    assert_ok(alice.get(MEMORIES))
    assert_ok(alice.get(f"{MEMORIES}/{item_id}/history"))
    assert reads(alice) == []


def test_an_auditor_reads_any_users_memory_history(alice, auditor):
    item_id = assert_ok(alice.post(MEMORIES, {"scope": "USER", "content": "报告用中文"}), 201)["id"]
    (event,) = assert_ok(auditor.get(f"/api/v1/admin/memory/{item_id}/history"))
    assert (event["type"], event["actor"], event["after"]) == ("CREATED", "USER", "报告用中文")


def test_the_history_of_a_missing_memory_is_404_for_an_auditor_too(auditor):
    assert_error(auditor.get("/api/v1/admin/memory/987654321/history"), 404, 3033)


def test_admins_see_every_audit_read_with_its_subject(alice, bob, auditor, admin):
    assert_ok(auditor.get(f"/api/v1/admin/memory?userId={alice.user_id}"))
    assert_ok(admin.get(f"/api/v1/admin/memory?userId={bob.user_id}"))
    records = reads(admin, "/api/v1/admin/access-log")
    assert [(r["viewer"]["username"], r["subject"]["username"]) for r in records] == \
        [("root", "bob"), ("auditor", "alice")]


def test_only_admins_read_everyones_access_log(auditor):
    assert_error(auditor.get("/api/v1/admin/access-log"), 403, 1002)
