"""The lean path's choice of requests (``hivegate.a2a.lean.lean_send_params``) and its required-field
check, which must agree with the SDK's ``validate_proto_required_fields`` on every request (a request
it wrongly passed would be served without the SDK's InvalidParamsError). Property tests over
generated ``SendMessage`` params, with fields dropped and emptied at random."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import SendMessageRequest
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import validate_proto_required_fields
from google.protobuf.json_format import ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st

from hivegate.a2a.lean import has_required_fields, lean_send_params

_V1 = {"a2a-version": "1.0"}
_TEXT = st.text(max_size=8)
_PART = st.fixed_dictionaries(
    {},
    optional={
        "text": _TEXT,
        "url": _TEXT,
        "data": st.dictionaries(_TEXT, _TEXT, max_size=2),
        "filename": _TEXT,
        "mediaType": _TEXT,
        "metadata": st.dictionaries(_TEXT, _TEXT, max_size=2),
    },
).filter(lambda part: sum(kind in part for kind in ("text", "url", "data")) <= 1)
_MESSAGE = st.fixed_dictionaries(
    {},
    optional={
        "messageId": _TEXT,
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"]),
        "parts": st.lists(_PART, max_size=3),
        "contextId": _TEXT,
        "metadata": st.dictionaries(_TEXT, _TEXT, max_size=2),
        "extensions": st.lists(_TEXT, max_size=2),
        "referenceTaskIds": st.lists(_TEXT, max_size=2),
    },
)
_CONFIGURATION = st.fixed_dictionaries(
    {},
    optional={
        "acceptedOutputModes": st.lists(_TEXT, max_size=2),
        "historyLength": st.integers(-2, 5),
        "taskPushNotificationConfig": st.fixed_dictionaries({}, optional={"url": _TEXT, "id": _TEXT}),
    },
)
_COMPLETE_MESSAGE = st.fixed_dictionaries(
    {
        "messageId": _TEXT,
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT"]),
        "parts": st.lists(_PART, min_size=1, max_size=3),
    },
    optional={"contextId": _TEXT, "metadata": st.dictionaries(_TEXT, _TEXT, max_size=2)},
)
_PARAMS = st.fixed_dictionaries(
    {}, optional={"message": _MESSAGE, "configuration": _CONFIGURATION, "metadata": st.dictionaries(_TEXT, _TEXT)}
) | st.fixed_dictionaries({"message": _COMPLETE_MESSAGE}, optional={"configuration": _CONFIGURATION})
"""Params of every shape, and params whose message has each required field (most then pass)."""


def _sdk_passes(params: SendMessageRequest) -> bool:
    try:
        validate_proto_required_fields(params)
    except InvalidParamsError:
        return False
    return True


@settings(max_examples=500, deadline=None)
@given(_PARAMS)
def test_the_required_field_check_is_the_sdks(raw: dict[str, Any]) -> None:
    params = ParseDict(raw, SendMessageRequest(), ignore_unknown_fields=True)
    assert has_required_fields(params) == _sdk_passes(params)


@settings(max_examples=300, deadline=None)
@given(_PARAMS)
def test_the_lean_path_takes_only_what_the_sdk_would_accept(raw: dict[str, Any]) -> None:
    chosen = lean_send_params(_V1, {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": raw})
    if chosen is not None:
        params, request_id = chosen
        assert request_id == 1
        assert _sdk_passes(params)
        assert not params.message.task_id
        assert not params.configuration.return_immediately
        assert not params.configuration.HasField("task_push_notification_config")
        assert params.configuration.history_length >= 0


def _body(**changes: Any) -> dict[str, Any]:
    message = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    return {"jsonrpc": "2.0", "id": "r", "method": "SendMessage", "params": {"message": message}, **changes}


def test_a_plain_blocking_send_is_taken() -> None:
    assert lean_send_params(_V1, _body()) is not None


def test_what_the_lean_path_leaves_to_the_sdk() -> None:
    body = _body()
    message = body["params"]["message"]
    assert lean_send_params({}, body) is None  # no A2A-Version: 0.3, the SDK's VersionNotSupported
    assert lean_send_params({"a2a-version": "1.0.1"}, body) is None
    assert lean_send_params({**_V1, "a2a-extensions": "urn:x"}, body) is None
    assert lean_send_params({**_V1, "x-a2a-extensions": "urn:x"}, body) is None
    assert lean_send_params(_V1, _body(method="message/send")) is None
    assert lean_send_params(_V1, _body(id=True)) is None
    assert lean_send_params(_V1, _body(id=None)) is None
    assert lean_send_params(_V1, _body(jsonrpc="1.0")) is None
    assert lean_send_params(_V1, _body(params=[1])) is None
    assert lean_send_params(_V1, _body(params={"message": {**message, "taskId": "t"}})) is None
    assert lean_send_params(_V1, _body(params={"message": message, "tenant": "x"})) is None
    for configuration in (
        {"returnImmediately": True},
        {"historyLength": -1},
        {"taskPushNotificationConfig": {"url": "u"}},
    ):
        assert lean_send_params(_V1, _body(params={"message": message, "configuration": configuration})) is None
    assert lean_send_params(_V1, _body(params={"message": {**message, "parts": "nope"}})) is None  # ParseDict fails
