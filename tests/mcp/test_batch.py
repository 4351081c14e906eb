"""Issue 7 item 13: splitting a 2025-03-26 batch and gathering the answers (:mod:`hivegate.mcp.batch`).

The per-message path is a fake here (an echo of the element's id, 202 for notifications); the real
path is exercised in tests/e2e/test_wire_negotiation.py.

Spec: MCP 2025-03-26 basic/transports, basic/lifecycle; JSON-RPC 2.0 §6.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from starlette.types import Message, Send

from hivegate.errors import InvalidParamsError, InvalidRequestError
from hivegate.mcp.batch import BatchTooLargeError, serve_batch


async def _fake_path(body: bytes, send: Send) -> None:
    """Answer a request with its id; acknowledge anything else with 202; ``"raise"`` raises as the checks do."""
    message: Any = orjson.loads(body)
    if message == "raise":
        raise InvalidParamsError("refused by a check")
    if isinstance(message, dict) and "id" in message and "method" in message:
        payload = orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message["method"]}})
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": payload})
        return
    await send({"type": "http.response.start", "status": 202, "headers": []})
    await send({"type": "http.response.body", "body": b""})


async def _serve(elements: list[Any], max_messages: int = 64) -> tuple[int, Any]:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    await serve_batch(elements, _fake_path, send, max_messages=max_messages)
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return sent[0]["status"], orjson.loads(body) if body else None


async def test_responses_for_the_requests_only_in_order() -> None:
    status, answers = await _serve(
        [
            {"jsonrpc": "2.0", "id": 1, "method": "a"},
            {"jsonrpc": "2.0", "method": "notifications/x"},
            {"jsonrpc": "2.0", "id": "two", "method": "b"},
        ]
    )
    assert status == 200
    assert [a["id"] for a in answers] == [1, "two"]


async def test_an_all_notification_batch_is_202() -> None:
    assert await _serve([{"jsonrpc": "2.0", "method": "notifications/x"}] * 3) == (202, None)


async def test_initialize_and_refused_elements_answer_in_the_array() -> None:
    status, answers = await _serve(
        [
            {"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {}},
            "raise",
            {"jsonrpc": "2.0", "id": 1, "method": "a"},
        ]
    )
    assert status == 200
    assert answers[0]["id"] == 9
    assert answers[0]["error"]["code"] == -32600
    assert answers[1]["id"] is None
    assert answers[1]["error"]["code"] == -32602
    assert answers[2]["result"] == {"echo": "a"}


async def test_empty_and_oversized_batches_are_refused_whole() -> None:
    with pytest.raises(InvalidRequestError):
        await _serve([])
    with pytest.raises(BatchTooLargeError) as too_large:
        await _serve([{"jsonrpc": "2.0", "id": i, "method": "a"} for i in range(5)], max_messages=4)
    assert (too_large.value.code, too_large.value.http_status, too_large.value.jsonrpc_code) == (
        "batch_too_large",
        400,
        -32600,
    )


async def test_a_request_level_refusal_answers_the_whole_batch() -> None:
    """Issue 7 item 13 (attack trial): an element's 404 (session gone or not the caller's) is the batch's answer.

    Folding it into a 200 array hid from the client that its session had ended (2025-03-26
    basic/transports: a client starts a new session on 404); later elements are not served.
    """
    served: list[Any] = []

    async def session_gone(body: bytes, send: Send) -> None:
        served.append(orjson.loads(body))
        payload = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
        headers = [(b"content-type", b"application/json"), (b"retry-after", b"5")]
        await send({"type": "http.response.start", "status": 404, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"}, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]
    await serve_batch(batch, session_gone, send, max_messages=64)
    assert sent[0]["status"] == 404
    assert (b"retry-after", b"5") in sent[0]["headers"]
    assert orjson.loads(sent[1]["body"])["error"]["message"] == "Session not found"
    assert served == batch[:1]
