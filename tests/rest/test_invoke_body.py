"""``parse_body`` of ``/v1/invoke``: any JSON gives a request or a 400 class, never another exception."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hivegate.errors import InvalidParamsError, InvalidRequestError
from hivegate.rest.invoke import MAX_TIMEOUT_MS, MIN_TIMEOUT_MS, parse_body

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_FIELDS = ("message", "context_id", "timeout_ms", "idempotency_key", "metadata", "attachments", "other")


@given(st.dictionaries(st.sampled_from(_FIELDS), _JSON, max_size=7) | _JSON)
def test_any_json_is_a_request_or_a_400(body: Any) -> None:
    try:
        request = parse_body(body)
    except (InvalidParamsError, InvalidRequestError):  # both are 400 (docs/errors.md)
        return
    assert isinstance(request.message, str)
    assert request.timeout_ms is None or MIN_TIMEOUT_MS <= request.timeout_ms <= MAX_TIMEOUT_MS


def test_members() -> None:
    request = parse_body(
        {
            "message": "hi",
            "context_id": "c1",
            "timeout_ms": 50,
            "idempotency_key": "k",
            "metadata": {"a": "b"},
            "attachments": [{"name": "a.txt", "mimeType": "text/plain", "data": "aGk="}],
            "unknown": 1,
        }
    )
    assert (request.message, request.context_id, request.timeout_ms) == ("hi", "c1", MIN_TIMEOUT_MS)
    assert [(a.name, a.mime_type, a.data) for a in request.attachments] == [("a.txt", "text/plain", "aGk=")]
    assert parse_body({"message": "x", "timeout_ms": 10**9}).timeout_ms == MAX_TIMEOUT_MS


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({}, "message"),
        ({"message": None}, "message"),
        ({"message": ["a"]}, "message"),
        ({"message": "x", "context_id": ""}, "context_id"),
        ({"message": "x", "context_id": "c" * 129}, "context_id"),
        ({"message": "x", "idempotency_key": 5}, "idempotency_key"),
        ({"message": "x", "metadata": []}, "metadata"),
        ({"message": "x", "timeout_ms": True}, "timeout_ms"),
        ({"message": "x", "timeout_ms": 1.5}, "timeout_ms"),
        ({"message": "x", "timeout_ms": 0}, "timeout_ms"),
        ({"message": "x", "attachments": {}}, "attachments"),
        ({"message": "x", "attachments": [{}] * 17}, "attachments"),
        ({"message": "x", "attachments": [{"uri": 1}]}, "attachments"),
        ({"message": "x", "attachments": [{"file_id": 5}]}, "attachments"),
        ({"message": "x", "attachments": [{"file_id": "f", "uri": "https://x"}]}, "attachments"),
        ({"message": "x", "attachments": [{"file_id": "f" * 129}]}, "attachments"),
        ({"message": "x", "attachments": [{"file_id": "f", "filename": 3}]}, "attachments"),
    ],
)
def test_each_bad_member_is_named(body: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidParamsError) as raised:
        parse_body(body)
    assert raised.value.data["param"] == param
