"""Task owners (``hivegate.a2a.tasks``) and the A2A message → Invocation mapping (``hivegate.a2a.executor``)."""

from __future__ import annotations

import base64

import orjson
import pytest
from a2a.server.context import ServerCallContext
from a2a.types import Message, Part, Role
from a2a.utils.errors import ContentTypeNotSupportedError
from google.protobuf.struct_pb2 import Value

from hivegate.a2a.executor import invocation_from_message
from hivegate.a2a.tasks import OWNER_STATE_KEY, owner_from_context, owner_of, task_owner
from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal

ALICE_KEY = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)
ALICE_TOKEN = Principal(kind=CredentialKind.OAUTH, user_id="u-alice", username="alice", agents=frozenset({"echo"}))
ALICE_BAK = Principal(kind=CredentialKind.AGENT_KEY, user_id="u-alice", username="alice", credential_id="k1")
BOB = Principal(kind=CredentialKind.USER_KEY, user_id="u-bob", username="bob", agents=None)


def test_owner_is_the_user_whatever_the_credential_kind() -> None:
    assert {owner_of(p, ("10.0.0.1", 1)) for p in (ALICE_KEY, ALICE_TOKEN, ALICE_BAK)} == {"u-alice"}
    assert owner_of(BOB, None) == "u-bob"


def test_anonymous_owner_is_the_address_key() -> None:
    assert owner_of(ANONYMOUS, ("127.0.0.1", 5000)) == "anonymous:127.0.0.1"
    assert owner_of(ANONYMOUS, ("127.0.0.1", 6000)) == owner_of(ANONYMOUS, ("127.0.0.1", 5000))
    assert owner_of(ANONYMOUS, ("127.0.0.2", 5000)) != owner_of(ANONYMOUS, ("127.0.0.1", 5000))
    # an IPv6 host counts by its /64, as the MCP budgets do
    assert owner_of(ANONYMOUS, ("2001:db8::1", 1)) == owner_of(ANONYMOUS, ("2001:db8::2", 1))
    assert owner_of(ANONYMOUS, None) == "anonymous:"


def test_task_owner_separates_agents_and_is_what_the_resolver_reads() -> None:
    assert task_owner(ALICE_KEY, None, "echo") == "u-alice/echo"
    assert task_owner(ALICE_KEY, None, "echo") != task_owner(ALICE_KEY, None, "echo2")
    context = ServerCallContext(state={OWNER_STATE_KEY: "u-alice/echo"})
    assert owner_from_context(context) == "u-alice/echo"
    with pytest.raises(KeyError):
        owner_from_context(ServerCallContext())


def test_message_parts_become_the_invocation() -> None:
    data = Value()
    data.struct_value.update({"a": 1})
    message = Message(
        role=Role.ROLE_USER,
        message_id="m",
        parts=[
            Part(text="hello"),
            Part(raw=b"\x00\x01", filename="b.bin", media_type="application/octet-stream"),
            Part(url="https://example.test/f.txt", media_type="text/plain"),
            Part(data=data),
            Part(text="world"),
        ],
    )
    invocation = invocation_from_message("echo", message, "ctx-1", ALICE_KEY)
    assert (invocation.agent_id, invocation.message, invocation.context_id) == ("echo", "hello\nworld", "ctx-1")
    assert invocation.principal is ALICE_KEY
    raw, url, json_part = invocation.attachments
    assert (raw.name, raw.mime_type, raw.data) == (
        "b.bin",
        "application/octet-stream",
        base64.b64encode(b"\x00\x01").decode(),
    )
    assert (url.uri, url.mime_type, url.data) == ("https://example.test/f.txt", "text/plain", None)
    assert json_part.mime_type == "application/json"
    assert orjson.loads(base64.b64decode(json_part.data or "")) == {"a": 1.0}


def test_a_part_without_content_is_refused() -> None:
    message = Message(role=Role.ROLE_USER, message_id="m", parts=[Part(text="hi"), Part()])
    with pytest.raises(ContentTypeNotSupportedError):
        invocation_from_message("echo", message, None, ANONYMOUS)
