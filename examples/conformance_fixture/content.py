"""Plain fixture tools: content types, tool errors, JSON Schema 2020-12 and ``x-mcp-header``."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.types import AudioContent, EmbeddedResource, ImageContent, TextContent, TextResourceContents
from pydantic import Field

from conformance_fixture.common import PNG_BASE64, WAV_BASE64

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}
"""The exact inputSchema the ``json-schema-2020-12`` scenario expects to find unaltered in tools/list."""


def contact_card(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,  # the schema's property name
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Formats a contact card; its advertised inputSchema uses JSON Schema 2020-12 keywords."""
    where = ", ".join(v for v in (address or {}).values() if v)
    reach = phone if contactMethod == "phone" else email
    return f"contact: {name or '?'} ({where or 'no address'}) via {contactMethod or 'email'} {reach or '?'}"


def json_schema_2020_12_tool() -> Tool:
    """``json_schema_2020_12_tool``: arguments are validated from the function, the schema is advertised verbatim."""
    tool = Tool.from_function(contact_card, name="json_schema_2020_12_tool")
    return tool.model_copy(update={"parameters": JSON_SCHEMA_2020_12})


def register(server: MCPServer) -> None:
    """Register the content tools on ``server``."""

    @server.tool(description="Returns a single text block.")
    def test_simple_text() -> str:
        return "hivegate conformance fixture: simple text."

    @server.tool(description="Returns a single PNG image block.")
    def test_image_content() -> list[ImageContent]:
        return [ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")]

    @server.tool(description="Returns a single WAV audio block.")
    def test_audio_content() -> list[AudioContent]:
        return [AudioContent(type="audio", data=WAV_BASE64, mime_type="audio/wav")]

    @server.tool(description="Returns an embedded text resource.")
    def test_embedded_resource() -> list[EmbeddedResource]:
        resource = TextResourceContents(
            uri="test://embedded-resource", mime_type="text/plain", text="Embedded by the hivegate fixture."
        )
        return [EmbeddedResource(type="resource", resource=resource)]

    @server.tool(description="Returns text, image and embedded-resource blocks together.")
    def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
        resource = TextResourceContents(
            uri="test://mixed-content", mime_type="application/json", text='{"fixture": "hivegate", "blocks": 3}'
        )
        return [
            TextContent(type="text", text="Three content blocks follow: text, image, resource."),
            ImageContent(type="image", data=PNG_BASE64, mime_type="image/png"),
            EmbeddedResource(type="resource", resource=resource),
        ]

    @server.tool(description="Always fails with a tool execution error (isError: true).")
    def test_error_handling() -> str:
        raise ToolError("test_error_handling failed on purpose (tool execution error)")

    @server.tool(description="Echoes a region that clients mirror into the Mcp-Param-Region header (SEP-2243).")
    def test_header_region(
        region: Annotated[
            str, Field(description="Mirrored as Mcp-Param-Region.", json_schema_extra={"x-mcp-header": "Region"})
        ],
        priority: Annotated[
            int, Field(description="Mirrored as Mcp-Param-Priority.", json_schema_extra={"x-mcp-header": "Priority"})
        ] = 0,
    ) -> str:
        return f"region={region} priority={priority}"
