"""A hand-written stdio MCP server (handshake era) that misbehaves on purpose: before each answer to a
``tools/call`` it writes a line that is not UTF-8 to its stdout (the protocol stream), which the SDK's own
servers never do. One tool, ``echo(message)``. For tests of the ``mcp`` backend only."""

from __future__ import annotations

import json
import sys

TOOL = {"name": "echo", "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}}}


def answer(request_id: object, result: object) -> None:
    sys.stdout.buffer.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).encode() + b"\n")
    sys.stdout.buffer.flush()


for raw in sys.stdin.buffer:
    message = json.loads(raw)
    method, request_id = message.get("method"), message.get("id")
    if request_id is None:
        continue
    if method == "initialize":
        answer(
            request_id,
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            },
        )
    elif method == "tools/list":
        answer(request_id, {"tools": [TOOL]})
    elif method == "tools/call":
        sys.stdout.buffer.write(b"\xff\xfe not utf-8\n")
        answer(request_id, {"content": [{"type": "text", "text": message["params"]["arguments"]["message"]}]})
    else:
        sys.stdout.buffer.write(
            json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}}
            ).encode()
            + b"\n"
        )
        sys.stdout.buffer.flush()
