"""A reply with more than text (issue 11 item 1: data and file parts) on every plane, from a python agent
that returns a :class:`~hivegate.calls.events.Reply`: MCP (both eras, the official client) gets the text,
the data as ``structuredContent.data`` and the files as image, embedded-resource and resource-link
content; REST invoke gets ``parts``; the a2a-sdk client gets the parts as they are.

Spec: MCP 2025-11-25 server/tools#tool-result, #structured-content; A2A 1.0 §4.1.6 (Part).
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import httpx2
import pytest
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest
from google.protobuf.json_format import MessageToDict
from mcp import Client as McpClient
from mcp.client.streamable_http import streamable_http_client
from mcp_types import EmbeddedResource, ImageContent, ResourceLink, TextContent

from hivegate.calls.events import ReplyPart
from hivegate.mcp.tool_calls import file_content_block
from tests.gateway_process import GatewayProcess, run_gateway

TIMEOUT = 30
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
PDF = b"%PDF-1.4 parts"
DATA = {"answer": 42, "items": ["a", "b"]}

AGENT = f"""
from hivegate.calls.events import Reply, ReplyPart


async def reply(invocation):
    return Reply((
        ReplyPart("text", text="here you are"),
        ReplyPart("data", data={DATA!r}),
        ReplyPart("file", content={PNG!r}, name="dot.png", media_type="image/png"),
        ReplyPart("file", content={PDF!r}, name="a b.pdf", media_type="application/pdf"),
        ReplyPart("file", uri="https://example.com/report.html", name="report", media_type="text/html"),
    ))
"""

CONFIG = """
[[agents]]
id = "parts"
name = "Parts"
owner = "alice"
auth = "none"
backend = { type = "python", callable = "parts_agent:reply" }
"""


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    folder: Path = tmp_path_factory.mktemp("reply-parts")
    (folder / "parts_agent.py").write_text(AGENT, encoding="utf-8")
    config = folder / "hivegate.toml"
    config.write_text(CONFIG, encoding="utf-8")
    with run_gateway(config) as running:
        yield running


@pytest.mark.parametrize("mode", ["2026-07-28", "legacy"])
async def test_mcp_callers_get_the_text_the_data_and_the_files(gateway: GatewayProcess, mode: str) -> None:
    async with (
        httpx2.AsyncClient(timeout=TIMEOUT) as http,
        McpClient(streamable_http_client(f"{gateway.url}/parts/mcp", http_client=http), mode=mode) as client,
    ):
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("parts", {"message": "go"})
    assert result.is_error is False
    text, image, pdf, link = result.content
    assert isinstance(text, TextContent)
    assert text.text.split("\n")[0] == "here you are"
    assert '{"answer":42,"items":["a","b"]}' in text.text  # the structured content's JSON, in text too
    assert isinstance(image, ImageContent)
    assert (base64.b64decode(image.data), image.mime_type) == (PNG, "image/png")
    assert isinstance(pdf, EmbeddedResource)
    resource = pdf.resource.model_dump(by_alias=True)
    assert base64.b64decode(resource["blob"]) == PDF
    assert resource["mimeType"] == "application/pdf"
    assert str(resource["uri"]).endswith("/a%20b.pdf")
    assert isinstance(link, ResourceLink)
    assert (str(link.uri), link.name, link.mime_type) == ("https://example.com/report.html", "report", "text/html")
    assert result.structured_content is not None
    assert result.structured_content["data"] == [DATA]


def test_rest_invoke_gets_the_parts(gateway: GatewayProcess) -> None:
    answer = httpx.post(f"{gateway.url}/parts/v1/invoke", json={"message": "go"}, timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    parts = answer.json()["parts"]
    assert [part["kind"] for part in parts] == ["text", "data", "file", "file", "file"]
    assert parts[1]["data"] == DATA
    assert base64.b64decode(parts[2]["bytes_base64"]) == PNG
    assert parts[4] == {
        "kind": "file",
        "name": "report",
        "media_type": "text/html",
        "url": "https://example.com/report.html",
    }


async def test_a2a_callers_get_the_parts_as_they_are(gateway: GatewayProcess) -> None:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        config = ClientConfig(httpx_client=http, streaming=False, supported_protocol_bindings=["JSONRPC"])
        client = await create_client(f"{gateway.url}/parts", client_config=config)
        try:
            message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="go")])
            with anyio.fail_after(TIMEOUT):
                events = [event async for event in client.send_message(SendMessageRequest(message=message))]
        finally:
            await client.close()
    parts = list(events[-1].task.artifacts[0].parts)
    assert [part.WhichOneof("content") for part in parts] == ["text", "data", "raw", "raw", "url"]
    assert parts[0].text == "here you are"
    assert MessageToDict(parts[1].data) == DATA
    assert (parts[2].raw, parts[2].filename, parts[2].media_type) == (PNG, "dot.png", "image/png")
    assert (parts[3].raw, parts[3].filename) == (PDF, "a b.pdf")
    assert parts[4].url == "https://example.com/report.html"


@pytest.mark.parametrize(
    ("version", "link_type", "audio_type"),
    [("2024-11-05", "text", "resource"), ("2025-03-26", "text", "audio"), ("2025-06-18", "resource_link", "audio")],
)
def test_file_parts_take_the_content_types_the_callers_version_has(
    version: str, link_type: str, audio_type: str
) -> None:
    """resource_link came in 2025-06-18, audio in 2025-03-26: an older caller gets what its schema has."""
    link = file_content_block(0, ReplyPart("file", uri="https://example.com/x", name="x"), version)
    assert link["type"] == link_type
    audio = file_content_block(1, ReplyPart("file", content=b"RIFF", name="a.wav", media_type="audio/wav"), version)
    assert audio["type"] == audio_type
