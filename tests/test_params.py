"""Ids and query strings, read the same way on every path (SPEC §9 Input, stricter): an id is
ASCII digits and nothing else; a query string is UTF-8 once percent-decoded."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from app import wire
from app.errors import InvalidInput
from tests.conftest import assert_error, assert_ok

LENIENT = ["42.0", "4_2", "+42", " 42 ", "42\n", "４２", "٤٢", "42²", "0x2a", "-42", ""]


@pytest.mark.parametrize("raw", LENIENT)
def test_an_id_is_ascii_digits_and_nothing_else(raw):
    with pytest.raises(ValueError):
        wire.ascii_id(raw)
    with pytest.raises(InvalidInput):
        wire.user_id(raw, "userId")


def test_an_id_of_ascii_digits_is_read():
    assert wire.ascii_id("0042") == 42 and wire.user_id("42", "userId") == 42


@pytest.mark.parametrize("raw", ["%FF", "a=%ED%A0%80", "a=%C0%AF", "a=%E4%B8", "a=\xff"])
def test_a_query_that_is_not_utf8_once_percent_decoded_is_refused(raw):
    assert not wire.query_is_utf8(raw)
    with pytest.raises(InvalidInput):
        wire.query_pairs(raw)


def test_a_utf8_query_is_read_as_werkzeug_reads_it():
    assert wire.query_pairs("projectKey=%E6%AF%9B&q=a+b&w=") == [
        ("projectKey", "毛"), ("q", "a b"), ("w", "")]


@pytest.mark.parametrize("raw", [" 1", "1 ", "+1", "1.0", "１"])
def test_x_user_id_is_ascii_digits_only(as_service, raw):
    assert_error(as_service().get("/api/v1/memory", headers={"X-User-Id": raw}), 400, 2001)


@pytest.mark.parametrize("path", ["/api/v1/memory", "/api/v1/memory/preview"])
def test_a_user_endpoints_query_that_is_not_utf8_is_2001(alice, path):
    assert_error(alice.get(path, query_string="projectKey=%FF"), 400, 2001)


def test_a_path_id_in_other_digits_names_no_memory(alice, memories):
    """`<int:…>` is ASCII digits: `/api/v1/memory/４２` is not item 42 (it was)."""
    item = memories.add(alice.user_id, "报告用中文")
    wide = "".join(chr(ord("０") + int(d)) for d in str(item))
    result = alice.patch(f"/api/v1/memory/{quote(wide)}", {"status": "DISMISSED"})
    assert result[0] == 404
    assert memories.get(item)["status"] == "ACTIVE"
    assert assert_ok(alice.patch(f"/api/v1/memory/{item}", {"status": "DISMISSED"}))
