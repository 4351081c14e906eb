"""Issue 7 item 6: property-based fuzzing of the MCP wire against a real hivegate server.

Hypothesis builds POST requests over both protocol eras — JSON-RPC bodies whose every member may
have the wrong type (``method`` an array or an object, ``id`` null or a float, ``params`` a list),
batches, non-JSON bytes, 2026-07-28 ``_meta`` envelopes with odd versions, and the headers that
route them: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` / ``Mcp-Param-*`` including
``=?base64?…?=`` values that do not decode, ``Accept`` with wildcards and weights, odd
``Content-Type``, live, foreign and made-up ``Mcp-Session-Id`` values — and sends them to a real
server (uvicorn on loopback, :mod:`tests.e2e.wire_gateway`) on every kind of endpoint:
``auth = "none"`` agents on the lean path (``echo``) and SDK-backed (``notes``, the conformance
fixture agent), agents that need a key (``bak_`` and ``oag_``), and the user-level ``/mcp``.

The properties, for every request: no 5xx; a reply is JSON or SSE; every JSON-RPC message in it is
``jsonrpc: "2.0"`` and an error has an integer ``code``, a string ``message`` and an ``id`` member
(``null`` when the request's id is unknown, JSON-RPC 2.0 §5). Bounded: a fixed number of examples
per endpoint (``HIVEGATE_FUZZ_EXAMPLES``, 80 by default), no deadline per example, a 10 s timeout
per request (≈ 20 s in all on 2 cores).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.wire_gateway import WireWorld, wire_gateway

EXAMPLES_PER_TARGET = int(os.environ.get("HIVEGATE_FUZZ_EXAMPLES", "80"))
"""Examples per endpoint; ``HIVEGATE_FUZZ_EXAMPLES=5000`` for a long run by hand."""
REQUEST_TIMEOUT_SECONDS = 10.0
MODERN = "2026-07-28"
VERSIONS = [MODERN, "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "2099-01-01", "draft", ""]
METHODS = [
    "initialize",
    "ping",
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "notifications/initialized",
    "notifications/cancelled",
    "no/such/method",
]
"""Every method but ``subscriptions/listen``, whose success is a stream that never ends."""
TOOL_NAMES = ["echo", "shout", "test_simple_text", "test_error_handling", "nope", ""]
"""Tools that answer at once (the conformance fixture's sampling and elicitation tools wait for the client)."""
ACCEPTS = [
    None,
    "application/json, text/event-stream",
    "application/json",
    "text/event-stream",
    "*/*",
    "text/*, application/*",
    "application/json;q=0, text/event-stream",
    "application/json, text/event-stream;q=0",
    "*/*;q=0",
    "text/html",
    "application/json;q=abc",
    "",
]


@dataclass(frozen=True)
class Target:
    path: str
    key: str | None
    """Which of :class:`WireWorld`'s keys to send (``bak*`` as ``X-Agent-API-Key``, ``oag`` as bearer)."""


TARGETS = [
    Target("/echo/mcp", None),
    Target("/notes/mcp", None),
    Target("/conformance/mcp", None),
    Target("/keyed/mcp", "bak"),
    Target("/keyed/mcp", "oag"),
    Target("/keyed-notes/mcp", "bak_notes"),
    Target("/mcp", "oag"),
]

# -- strategies --------------------------------------------------------------------------------

_header_text = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=24
)
"""Header values HTTP/1.1 can carry (latin-1, no controls, no edge whitespace)."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)
ids = st.integers(-(2**63), 2**63) | st.text(max_size=8) | st.none() | st.booleans() | st.floats(allow_nan=False)


def _encoded(value: str) -> str:
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


broken_sentinels = st.one_of(
    _header_text.map(lambda t: f"=?base64?{t}?="),  # mostly not base64
    st.text(alphabet=st.characters(min_codepoint=0x80, max_codepoint=0xFF), min_size=1, max_size=6).map(
        lambda t: f"=?base64?{t}?="  # not ASCII: the SDK's decoder raised on these
    ),
    st.text(max_size=8).map(lambda t: _encoded(t)[:-3] + "?="),  # truncated
)
name_headers = st.one_of(
    broken_sentinels, broken_sentinels, st.sampled_from(TOOL_NAMES), st.text(max_size=8).map(_encoded), _header_text
)
envelopes = st.fixed_dictionaries(
    {},
    optional={
        "io.modelcontextprotocol/protocolVersion": st.sampled_from(VERSIONS) | json_values,
        "io.modelcontextprotocol/clientCapabilities": st.just({}) | json_values,
        "io.modelcontextprotocol/clientInfo": st.just({"name": "fuzz", "version": "0"}) | json_values,
        "progressToken": st.text(max_size=4) | st.integers(0, 9),
        "io.modelcontextprotocol/logLevel": st.sampled_from(["debug", "info"]) | json_values,
    },
)
URIS = ["hivegate://agent/config", "echo://readme", "note://1", "test://static-text", "nope://x"]
NAME_KEY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
WEIGHTED_METHODS = [*METHODS, *NAME_KEY, *NAME_KEY]
"""The name-bearing methods twice as often: their ``Mcp-Name`` is checked against the body."""
MUTATIONS = [
    "method",
    "id",
    "drop_id",
    "params",
    "jsonrpc",
    "meta",
    "name_value",
    "name_header",
    "param_header",
    "method_header",
    "version",
    "accept",
    "content_type",
    "session",
    "batch",
    "raw_body",
]


@dataclass
class Fuzzable:
    """One request to send: its era (``modern``, ``live-<version>`` for a real session, ``none``),
    the body and the headers (``None`` values are left out)."""

    era: str
    body: Any
    headers: dict[str, str | None]
    raw: bytes | None = None


@st.composite
def fuzzables(draw: st.DrawFn) -> Fuzzable:
    """A well-formed request of a random era, then up to three mutations (each a class of bad input)."""
    era = draw(st.sampled_from(["modern", "modern", "modern", "live-2025-03-26", "live-2025-11-25", "none"]))
    method = draw(st.sampled_from(WEIGHTED_METHODS))
    params: dict[str, Any] = {}
    if method in NAME_KEY:
        params[NAME_KEY[method]] = draw(st.sampled_from(URIS if method == "resources/read" else TOOL_NAMES))
    if method == "tools/call":
        params["arguments"] = {"message": draw(st.text(max_size=8))}
    if method == "initialize":
        params.update(protocolVersion=draw(st.sampled_from(VERSIONS)), capabilities={}, clientInfo={"name": "f"})
    headers: dict[str, str | None] = {
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    if era == "modern":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "fuzz", "version": "0"},
        }
        headers.update({"MCP-Protocol-Version": MODERN, "Mcp-Method": method})
        if method in NAME_KEY:
            headers["Mcp-Name"] = params[NAME_KEY[method]]
    body: Any = {"jsonrpc": "2.0", "id": draw(st.integers(0, 99)), "method": method, "params": params}
    fuzzable = Fuzzable(era, body, headers)
    for mutation in draw(st.lists(st.sampled_from(MUTATIONS), min_size=1, max_size=3)):
        _mutate(draw, fuzzable, mutation, method)
    return fuzzable


def _mutate(draw: st.DrawFn, f: Fuzzable, mutation: str, method: str) -> None:  # noqa: C901  # one flat branch per class
    body = f.body if isinstance(f.body, dict) else None
    params = body.get("params") if body is not None else None
    if mutation == "batch":
        f.body = [
            f.body,
            *draw(st.lists(st.one_of(json_values, st.just({"jsonrpc": "2.0", "method": "x"})), max_size=2)),
        ]
    elif mutation == "raw_body":
        f.raw = draw(st.binary(max_size=48))
    elif mutation in ("name_header", "param_header"):
        header = "Mcp-Name" if mutation == "name_header" else "Mcp-Param-Message"
        f.headers[header] = draw(name_headers)
    elif mutation == "method_header":
        f.headers["Mcp-Method"] = draw(st.none() | st.sampled_from(METHODS) | _header_text)
    elif mutation == "version":
        f.headers["MCP-Protocol-Version"] = draw(st.none() | st.sampled_from(VERSIONS) | _header_text)
    elif mutation == "accept":
        f.headers["Accept"] = draw(st.sampled_from(ACCEPTS))
    elif mutation == "content_type":
        f.headers["Content-Type"] = draw(st.sampled_from(["application/json; charset=utf-8", "text/plain", None]))
    elif mutation == "session":
        f.era = draw(st.sampled_from(["made-up", "none", "live-2025-03-26", "live-2025-11-25"]))
    elif body is None:
        return
    elif mutation == "method":
        body["method"] = draw(
            st.one_of(st.lists(json_values, max_size=2), st.dictionaries(st.text(max_size=4), json_values), json_values)
        )
    elif mutation == "id":
        body["id"] = draw(ids)
    elif mutation == "drop_id":
        body.pop("id", None)
    elif mutation == "params":
        body["params"] = draw(json_values)
    elif mutation == "jsonrpc":
        body["jsonrpc"] = draw(json_values)
    elif mutation == "meta" and isinstance(params, dict):
        params["_meta"] = draw(envelopes | json_values)
    elif mutation == "name_value" and isinstance(params, dict) and method in NAME_KEY:
        params[NAME_KEY[method]] = draw(json_values | st.text(max_size=8))


# -- the server and its sessions ---------------------------------------------------------------


@dataclass
class Fuzzed:
    world: WireWorld
    client: httpx.Client
    sessions: dict[tuple[str, str | None, str], dict[str, str]]
    """Per (path, key, version): the headers that continue a live handshake-era session."""

    def credentials(self, target: Target) -> dict[str, str]:
        if target.key is None:
            return {}
        key = self.world.keys[target.key]
        return {"Authorization": f"Bearer {key}"} if target.key == "oag" else {"X-Agent-API-Key": key}


def _open_session(client: httpx.Client, path: str, credentials: dict[str, str], version: str) -> dict[str, str]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}},
    }
    headers = {**credentials, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    response = client.post(path, json=initialize, headers=headers)
    assert response.status_code == 200, response.text
    session = {"Mcp-Session-Id": response.headers["mcp-session-id"]}
    if version >= "2025-06-18":
        session["MCP-Protocol-Version"] = version
    done = client.post(
        path, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={**headers, **session}
    )
    assert done.status_code == 202, done.text
    return session


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    with (
        wire_gateway(tmp_path_factory.mktemp("fuzz")) as world,
        httpx.Client(base_url=world.url, timeout=REQUEST_TIMEOUT_SECONDS) as client,
    ):
        state = Fuzzed(world, client, {})
        for target in TARGETS:
            for version in ("2025-03-26", "2025-11-25"):
                credentials = state.credentials(target)
                state.sessions[(target.path, target.key, version)] = _open_session(
                    client, target.path, credentials, version
                )
        yield state


# -- the properties ----------------------------------------------------------------------------


def _check_message(message: Any, context: str) -> None:
    assert isinstance(message, dict), context
    assert message.get("jsonrpc") == "2.0", context
    if "error" in message:
        error = message["error"]
        assert isinstance(error, dict), context
        assert isinstance(error.get("code"), int), context
        assert not isinstance(error.get("code"), bool), context
        assert isinstance(error.get("message"), str), context
        assert "id" in message, context  # JSON-RPC 2.0 §5: null when the request id is unknown
    elif "result" in message:
        assert "id" in message, context
    else:
        assert isinstance(message.get("method"), str), context  # a server notification or request on a stream


def check_reply(response: httpx.Response, context: str) -> None:
    """No 5xx, no traceback; a JSON or SSE body of well-formed JSON-RPC messages (or 202 with none)."""
    context = f"{context} -> {response.status_code} {response.headers.get('content-type')} {response.text[:500]!r}"
    assert response.status_code < 500, context
    assert "Traceback" not in response.text, context
    if response.status_code == 202 and not response.content:
        return
    content_type = response.headers.get("content-type", "")
    if content_type.startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        for item in data:
            if item:
                _check_message(json.loads(item), context)
        return
    assert content_type.startswith("application/json"), context
    decoded = json.loads(response.text)
    for message in decoded if isinstance(decoded, list) else [decoded]:
        _check_message(message, context)


def _wire(state: Fuzzed, target: Target, f: Fuzzable) -> tuple[bytes, dict[bytes, bytes]]:
    """The body and header bytes of ``f`` for ``target`` (credentials and session filled in)."""
    headers: dict[str, str] = state.credentials(target)
    if f.era.startswith("live-"):
        session = state.sessions[(target.path, target.key, f.era.removeprefix("live-"))]
        headers.update(session)
    elif f.era == "made-up":
        headers["Mcp-Session-Id"] = "0123abcd"
    for name, value in f.headers.items():
        if value is not None:
            headers[name] = value
        elif name in headers and name != "Mcp-Session-Id":
            del headers[name]
    body = f.raw if f.raw is not None else json.dumps(f.body).encode()
    return body, {name.encode(): value.encode("latin-1") for name, value in headers.items()}  # the wire bytes


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: f"{t.path}:{t.key or 'open'}")
def test_fuzzed_requests_never_fail_the_server(fuzzed: Fuzzed, target: Target) -> None:
    """Issue 7 item 6: no fuzzed request gets a 5xx, and every error is a JSON-RPC error with an ``id``."""

    @settings(
        max_examples=EXAMPLES_PER_TARGET,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
    )
    @given(f=fuzzables())
    def fuzz(f: Fuzzable) -> None:
        content, headers = _wire(fuzzed, target, f)
        response = fuzzed.client.post(target.path, content=content, headers=headers)
        check_reply(response, f"POST {target.path} {headers} {content[:300]!r}")
        opened = response.headers.get("mcp-session-id")
        if opened is not None and b"Mcp-Session-Id" not in headers:
            fuzzed.client.delete(target.path, headers={**fuzzed.credentials(target), "Mcp-Session-Id": opened})

    fuzz()


@pytest.mark.parametrize("path", ["/echo/mcp", "/notes/mcp", "/mcp"])
def test_the_inputs_that_failed_the_server(fuzzed: Fuzzed, path: str) -> None:
    """Issue 7 item 6: the fuzz findings — a 2026-07-28 ``method`` that is an array or an object, and an
    ``Mcp-Name`` / ``Mcp-Param-*`` in the ``=?base64?…?=`` form that does not decode — are 400s with a
    JSON-RPC body (-32600 with the request's id when readable / -32020), on the lean path, the SDK path and ``/mcp``."""
    target = next(t for t in TARGETS if t.path == path)
    credentials = fuzzed.credentials(target)
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}
    base = {**credentials, "Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    modern = {**base, "MCP-Protocol-Version": MODERN}
    for method in (["tools/list"], {"a": 1}):
        for message in ({"jsonrpc": "2.0", "id": 1, "method": method}, {"jsonrpc": "2.0", "method": method}):
            response = fuzzed.client.post(
                path, json={**message, "params": {"_meta": meta}}, headers={**modern, "Mcp-Method": "tools/list"}
            )
            check_reply(response, f"{path} method={method!r}")
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == -32600, response.text
            # JSON-RPC 2.0 §5: the id is echoed when it can be read (issue 8's attack trial), else null.
            assert response.json()["id"] == message.get("id"), response.text
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {}, "_meta": meta},
    }
    for header in ("Mcp-Name", "Mcp-Param-Message"):
        for value in ("=?base64?\xe9\xe9?=", "=?base64?\xff?="):
            headers = {**modern, "Mcp-Method": "tools/call", "Mcp-Name": "echo", header: value}
            wire = {name.encode(): value.encode("latin-1") for name, value in headers.items()}
            response = fuzzed.client.post(path, json=call, headers=wire)
            check_reply(response, f"{path} {header}={value!r}")
            assert response.status_code == 400, response.text
            assert response.json()["error"]["code"] == -32020, response.text
