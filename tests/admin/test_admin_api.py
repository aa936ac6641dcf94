"""Admin API: read-only memory audit, system settings, models (SPEC §4, seed §5.4)."""

import pytest

from app.extensions import db
from app.system import service as system
from tests.conftest import assert_error, assert_ok

AUDIT = "/api/v1/admin/memory"


@pytest.fixture
def models(app):
    with app.app_context():
        ids = [system.add_model("fast", "gpt-fast", default=True).id,
               system.add_model("smart", "gpt-smart", base_url="http://127.0.0.1:9/v1",
                                api_key_env="SMART_API_KEY").id]
        db.session.remove()
    return ids


def test_audit_needs_memory_read(alice, bob):
    assert_error(alice.get(f"{AUDIT}?userId={bob.user_id}"), 403, 1002)


def test_audit_reads_any_users_memories(auditor, alice, memories):
    memories.add(alice.user_id, "alice's fact")
    memories.add(alice.user_id, "dismissed", status="DISMISSED")
    page = assert_ok(auditor.get(f"{AUDIT}?userId={alice.user_id}&status=ACTIVE"))
    assert [r["content"] for r in page["records"]] == ["alice's fact"]
    assert page["total"] == 1


def test_audit_filters_and_pages(auditor, alice, memories):
    memories.bulk(alice.user_id, [f"p {i}" for i in range(3)], scope="PROJECT",
                  project_key="mao")
    memories.bulk(alice.user_id, [f"u {i}" for i in range(3)])
    page = assert_ok(auditor.get(f"{AUDIT}?userId={alice.user_id}&scope=PROJECT&pageSize=2"))
    assert [r["content"] for r in page["records"]] == ["p 2", "p 1"]
    assert (page["total"], page["size"]) == (3, 2)


def test_admins_may_audit(admin, alice, memories):
    memories.add(alice.user_id, "fact")
    assert assert_ok(admin.get(f"{AUDIT}?userId={alice.user_id}"))["total"] == 1


@pytest.mark.parametrize("query", ["", "userId=", "userId=abc", "userId=0", "userId=1&page=0",
                                   "userId=1&status=NOPE", "userId=1.0", "userId=1_0",
                                   "userId=%2B1", "userId=%201", "userId=%EF%BC%91"])
def test_audit_needs_a_valid_user_id_and_params(auditor, query):
    assert_error(auditor.get(f"{AUDIT}?{query}"), 400, 2001)


@pytest.mark.parametrize("method", ["POST", "PATCH", "PUT", "DELETE"])
def test_audit_has_no_write_method(auditor, alice, memories, method):
    item = memories.add(alice.user_id, "fact")
    status, body = auditor.call(method, AUDIT, {"userId": alice.user_id})
    assert status == 405 and body["code"] == 2001
    status, _ = auditor.call(method, f"{AUDIT}/{item}", {"status": "DISMISSED"})
    assert status in (404, 405)
    assert memories.get(item)["status"] == "ACTIVE"


def test_service_token_cannot_use_admin_endpoints(as_service, admin):
    assert_error(as_service(admin.user_id).get("/api/v1/admin/settings"), 403, 1002)


def test_admin_endpoints_need_authentication(client):
    for path in (f"{AUDIT}?userId=1", "/api/v1/admin/settings", "/api/v1/admin/models"):
        response = client.get(path)
        assert (response.status_code, response.get_json()["code"]) == (401, 1001)


def test_settings_list_has_the_seeded_extraction_model_row(admin):
    settings = assert_ok(admin.get("/api/v1/admin/settings"))
    assert {"key": "memory.extractionModelId", "value": "", "category": "记忆",
            "description": "记忆自动抽取使用的模型 ID,留空则使用默认模型",
            "editable": True} in settings


def test_settings_need_admin_not_just_memory_read(auditor):
    assert_error(auditor.get("/api/v1/admin/settings"), 403, 1002)
    assert_error(auditor.get("/api/v1/admin/models"), 403, 1002)
    assert_error(auditor.put("/api/v1/admin/settings/memory.extractionModelId", {"value": ""}),
                 403, 1002)


def test_extraction_model_accepts_a_model_id_or_empty(admin, models):
    url = "/api/v1/admin/settings/memory.extractionModelId"
    assert assert_ok(admin.put(url, {"value": str(models[1])}))["value"] == str(models[1])
    assert assert_ok(admin.put(url, {"value": models[0]}))["value"] == str(models[0])
    assert assert_ok(admin.put(url, {"value": ""}))["value"] == ""


@pytest.mark.parametrize("value", ["999", "abc", "-1"])
def test_extraction_model_rejects_unknown_models_with_3003(admin, models, value):
    url = "/api/v1/admin/settings/memory.extractionModelId"
    assert_error(admin.put(url, {"value": value}), 400, 3003)
    settings = assert_ok(admin.get("/api/v1/admin/settings"))
    assert next(s for s in settings if s["key"] == "memory.extractionModelId")["value"] == ""


@pytest.mark.parametrize("body", [{}, {"value": None}, {"value": ["1"]}, {"value": True}])
def test_setting_value_must_be_given(admin, models, body):
    assert_error(admin.put("/api/v1/admin/settings/memory.extractionModelId", body), 400, 2001)


def test_unknown_setting_is_param_invalid(admin):
    assert_error(admin.put("/api/v1/admin/settings/no.such.key", {"value": "x"}), 400, 2001)


def test_models_list(admin, models):
    assert assert_ok(admin.get("/api/v1/admin/models")) == [
        {"id": models[0], "name": "fast", "model": "gpt-fast", "isDefault": True},
        {"id": models[1], "name": "smart", "model": "gpt-smart", "isDefault": False},
    ]
