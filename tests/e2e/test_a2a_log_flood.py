"""Malformed A2A requests get their JSON-RPC error and leave no traceback in the server log: the a2a-sdk
logs each one as an ERROR with some 35 lines of traceback, which anyone who can reach an agent's A2A
endpoint could use to fill the log (``hivegate.a2a.bindings``). Spec: A2A 1.0 §9 (JSON-RPC errors)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.gateway_process import GatewayProcess, run_gateway

ROOT = Path(__file__).resolve().parents[2]
HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0"}

MALFORMED = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "hi"}], "contextId": 123}},
    },
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "SendMessage",
        "params": {"message": {"messageId": 5, "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
    },
    {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "X", "parts": "no"}},
    },
    {"jsonrpc": "2.0", "id": 4, "method": "GetTask", "params": {"id": {"nested": True}}},
    {"jsonrpc": "1.0", "id": 5, "method": 7},
]


@pytest.fixture(scope="module")
def gateway() -> Iterator[GatewayProcess]:
    with run_gateway(ROOT / "examples" / "hivegate.toml") as running:
        yield running


def _post(gateway: GatewayProcess, body: object) -> httpx.Response:
    return httpx.post(f"{gateway.url}/echo/a2a", json=body, headers=HEADERS, timeout=10)


def test_malformed_requests_are_answered_and_not_logged_with_tracebacks(gateway: GatewayProcess) -> None:
    gateway.output()  # what start-up printed
    for body in MALFORMED:
        answer = _post(gateway, body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["error"]["code"] in (-32600, -32602), answer.text
    wrong_version = {**HEADERS, "A2A-Version": "9" * 3000}  # the SDK's version check echoed it in a WARNING
    refused = httpx.post(f"{gateway.url}/echo/a2a", json=MALFORMED[0], headers=wrong_version, timeout=10)
    assert "error" in refused.json(), refused.text
    ok = _post(
        gateway,
        {
            "jsonrpc": "2.0",
            "id": 9,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m9", "role": "ROLE_USER", "parts": [{"text": "still here"}]}},
        },
    )
    assert ok.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", ok.text
    logged = gateway.output()
    assert "Traceback" not in logged, logged
    assert "Failed to parse" not in logged, logged
    assert "999999" not in logged, logged


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=10,
    )
)
def test_any_message_value_is_answered_without_a_traceback(gateway: GatewayProcess, value: object) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": value}}
    answer = _post(gateway, body)
    assert answer.status_code == 200, answer.text
    assert "error" in answer.json() or "result" in answer.json(), answer.text
    logged = gateway.output()
    assert "Traceback" not in logged, logged
