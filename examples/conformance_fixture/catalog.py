"""Fixture resources, resource template, prompts and the completion handler."""

from __future__ import annotations

import json

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    EmbeddedResource,
    ImageContent,
    PromptReference,
    ResourceTemplateReference,
    TextContent,
    TextResourceContents,
)

from conformance_fixture.common import PNG_BASE64, PNG_BYTES, FixtureState

TEMPLATE_URI = "test://template/{id}/data"

COMPLETION_CANDIDATES: dict[tuple[str, str], list[str]] = {
    (TEMPLATE_URI, "id"): ["1", "7", "42", "123", "2026"],
    ("test_prompt_with_arguments", "arg1"): ["alpha", "beta", "gamma"],
    ("test_prompt_with_arguments", "arg2"): ["one", "two", "three"],
    ("test_prompt_with_embedded_resource", "resourceUri"): ["test://static-text", "test://watched-resource"],
}
"""Completion values per (prompt name or template URI, argument name); filtered by prefix."""


def register_resources(server: MCPServer, state: FixtureState) -> None:
    """The static resources, the watched resource and the template."""

    @server.resource("test://static-text", name="static-text", mime_type="text/plain", description="Static text.")
    def static_text() -> str:
        return "Static text served by the hivegate conformance fixture."

    @server.resource("test://static-binary", name="static-binary", mime_type="image/png", description="A tiny PNG.")
    def static_binary() -> bytes:
        return PNG_BYTES

    @server.resource(
        "test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        description="A resource clients may subscribe to.",
    )
    def watched_resource() -> str:
        return state.watched_text

    @server.resource(TEMPLATE_URI, name="template-data", mime_type="application/json", description="Data for one id.")
    def template_data(id: str) -> str:  # the URI template's variable name
        return json.dumps({"id": id, "templateTest": True, "data": f"fixture data for id {id}"})


def register_prompts(server: MCPServer) -> None:
    """The plain fixture prompts (the input-required prompt lives in ``input_required``)."""

    @server.prompt(description="A prompt without arguments.")
    def test_simple_prompt() -> list[Message]:
        return [UserMessage(content=TextContent(type="text", text="A simple prompt from the hivegate fixture."))]

    @server.prompt(description="A prompt with two required arguments.")
    def test_prompt_with_arguments(arg1: str, arg2: str) -> list[Message]:
        text = f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"
        return [UserMessage(content=TextContent(type="text", text=text))]

    @server.prompt(description="A prompt embedding the resource named by resourceUri.")
    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # the suite's argument name
        resource = TextResourceContents(uri=resourceUri, mime_type="text/plain", text="Embedded prompt resource.")
        return [
            UserMessage(content=EmbeddedResource(type="resource", resource=resource)),
            UserMessage(content=TextContent(type="text", text="Summarise the embedded resource above.")),
        ]

    @server.prompt(description="A prompt carrying an image.")
    def test_prompt_with_image() -> list[Message]:
        return [
            UserMessage(content=ImageContent(type="image", data=PNG_BASE64, mime_type="image/png")),
            UserMessage(content=TextContent(type="text", text="Describe the image above.")),
        ]


def register_completion(server: MCPServer) -> None:
    """``completion/complete`` for the template id and the prompt arguments."""

    @server.completion()
    async def complete(
        ref: PromptReference | ResourceTemplateReference,
        argument: CompletionArgument,
        context: CompletionContext | None,
    ) -> Completion:
        target = ref.name if isinstance(ref, PromptReference) else ref.uri
        candidates = COMPLETION_CANDIDATES.get((target, argument.name), [])
        values = [value for value in candidates if value.startswith(argument.value)]
        return Completion(values=values, total=len(values), has_more=False)


def register(server: MCPServer, state: FixtureState) -> None:
    """Register resources, prompts and completion on ``server``."""
    register_resources(server, state)
    register_prompts(server)
    register_completion(server)
