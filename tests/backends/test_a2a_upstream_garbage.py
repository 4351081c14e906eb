"""The a2a backend against a hostile upstream, in process: an ``httpx.MockTransport`` serves what the
upstream would (a fake upstream, not a mock of the backend). Found by issue 11's attack trial: garbage
that the a2a-sdk's protobuf parser rejects, a card naming another origin, a token that cannot be a header.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import Part
from hypothesis import given, settings
from hypothesis import strategies as st

from hivegate.agents.model import A2ABackendSpec
from hivegate.auth.principal import CredentialKind, Principal
from hivegate.backends.a2a import A2ABackend, reply_parts, reply_text
from hivegate.backends.base import Invocation
from hivegate.errors import AgentServiceUnavailableError

CARD_URL = "http://upstream.test/agent/.well-known/agent-card.json"
ALICE = Principal(kind=CredentialKind.USER_KEY, user_id="u-alice", username="alice", agents=None)


def card(interface: str = "http://upstream.test/agent/a2a") -> dict[str, Any]:
    return {
        "name": "Upstream",
        "description": "d",
        "version": "1.0.0",
        "supportedInterfaces": [{"url": interface, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": False},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
    }


async def call(handler: Callable[[httpx.Request], httpx.Response], **spec: Any) -> str:
    backend = A2ABackend(
        "garbage",
        A2ABackendSpec.model_validate({"type": "a2a", "card_url": CARD_URL, **spec}),
        httpx.MockTransport(handler),
    )
    async with anyio.create_task_group() as tasks:
        await backend.start(tasks)
    try:
        with anyio.fail_after(10):
            reply = await backend.invoke(Invocation(agent_id="garbage", message="hi", principal=ALICE), None)
            assert isinstance(reply, str), reply
            return reply
    finally:
        await backend.aclose()


def serving(card_body: Any, reply: Any = None) -> Callable[[httpx.Request], httpx.Response]:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("agent-card.json"):
            return httpx.Response(
                200, content=card_body if isinstance(card_body, bytes) else json.dumps(card_body).encode()
            )
        body = json.loads(request.content)
        return httpx.Response(
            200, json={"jsonrpc": "2.0", "id": body["id"], **reply} if reply is not None else {"x": 1}
        )

    return handler


@pytest.mark.parametrize(
    "card_body",
    [[1, 2, 3], {"name": {"not": "a string"}}, b"[" * 200_000, b"not json", {"name": "x", "supportedInterfaces": "no"}],
    ids=["a list", "a wrong field type", "a recursion bomb", "not json", "interfaces not a list"],
)
async def test_a_card_that_is_not_one_is_agent_service_unavailable(card_body: Any) -> None:
    with pytest.raises(AgentServiceUnavailableError):
        await call(serving(card_body))


@pytest.mark.parametrize(
    "reply",
    [
        {"result": {"task": {"id": {"nested": 1}}}},
        {"result": {"message": {"parts": [{"data": {"a": json.loads("[" * 90 + "]" * 90)}}]}}},
        {"result": [1, 2]},
        {"error": {"code": -32603, "message": "boom"}},
    ],
    ids=["a wrong field type", "too deep", "not an object", "a JSON-RPC error"],
)
async def test_a_reply_that_is_not_a2a_is_agent_service_unavailable(reply: Any) -> None:
    with pytest.raises(AgentServiceUnavailableError):
        await call(serving(card(), reply))


async def test_an_interface_on_another_origin_is_not_used() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return serving(card("http://169.254.169.254/latest/meta-data"))(request)

    with pytest.raises(AgentServiceUnavailableError):
        await call(handler)
    assert seen == [CARD_URL]  # nothing was sent to the address the card named


async def test_a_token_that_cannot_be_a_header_is_refused_and_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UPSTREAM_SECRET", "s3cret")
    token_requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/token":
            token_requests.append(request)
            return httpx.Response(200, json={"access_token": "abc\r\nX-Injected: 1", "token_type": "Bearer"})
        return serving(card())(request)

    oauth = {"token_url": "http://issuer.test/token", "client_id": "gw", "client_secret_env": "UPSTREAM_SECRET"}
    for _ in range(2):
        with pytest.raises(AgentServiceUnavailableError):
            await call(handler, oauth=oauth)
    assert len(token_requests) == 2  # asked again: the bad token was not kept


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(st.text(), st.binary(max_size=64), st.dictionaries(st.text(max_size=8), st.integers())), max_size=8
    )
)
def test_reply_text_renders_any_parts(values: list[Any]) -> None:
    from a2a.types import Part
    from google.protobuf.struct_pb2 import Struct, Value

    parts: list[Part] = []
    for value in values:
        if isinstance(value, str):
            parts.append(Part(text=value))
        elif isinstance(value, bytes):
            parts.append(Part(raw=value, filename="f", media_type="application/octet-stream"))
        else:
            data = Struct()
            data.update(value)
            parts.append(Part(data=Value(struct_value=data)))
    rendered = reply_text(parts)
    assert isinstance(rendered, str)
    for value in values:
        if isinstance(value, str):
            assert value in rendered


async def test_parsing_a_heavy_reply_does_not_hold_up_the_gateways_loop() -> None:
    """Found by the attack trial: a reply of a million small JSON values took the a2a-sdk's parser seconds,
    on the gateway's loop, which answered nobody meanwhile. The exchange now runs on the upstream loop:
    while it parses, this loop keeps turning (a ticker's longest gap stays a small part of the call)."""
    zeros = [0] * 400_000
    heavy = {"result": {"message": {"role": "ROLE_AGENT", "messageId": "m", "parts": [{"data": {"z": zeros}}]}}}
    gaps: list[float] = []
    finished = anyio.Event()

    async def tick() -> None:
        last = anyio.current_time()
        while not finished.is_set():
            await anyio.sleep(0.005)
            now = anyio.current_time()
            gaps.append(now - last)
            last = now

    reply, took = "", 0.0
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(tick)
        started = anyio.current_time()
        reply = await call(serving(card(), heavy), max_result_bytes=16 * 1024 * 1024)
        took = anyio.current_time() - started
        finished.set()
    assert reply.startswith("[data, ")  # too big to render: described
    assert took > 0.3, f"the reply parsed in {took:.2f} s: too light to show anything"
    assert max(gaps) < took / 3, (max(gaps), took)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300), st.text(max_size=80), st.text(max_size=80), st.booleans())
def test_what_an_upstream_says_of_a_file_is_cleaned(name: str, media_type: str, url: str, link: bool) -> None:
    """From the attack trial: an upstream's file name, media type and link reached MCP content, REST and
    the reply text as they were (line breaks, escapes, bidirectional overrides, ``file:`` links)."""
    part = (
        Part(url=url, filename=name, media_type=media_type)
        if link
        else Part(raw=b"x", filename=name, media_type=media_type)
    )
    (converted,) = reply_parts([part])
    for shown in (converted.name or "", converted.media_type or "", converted.uri or "", converted.text):
        assert not any(unicodedata.category(c) in ("Cc", "Cf") for c in shown), repr(shown)
    assert len(converted.name or "") <= 255
    if converted.uri is not None:
        assert converted.uri.lower().startswith(("http://", "https://"))
