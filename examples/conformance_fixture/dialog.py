"""Asking the client for input in both protocol eras.

A fixture *flow* is a plain function of one :class:`Round` (the client's capabilities, the responses
it sent back and the echoed ``requestState``) that either finishes with a value or asks for more
input by returning an ``InputRequiredResult``. :func:`converse` runs a flow for the current request:

* 2026-07-28: the ``InputRequiredResult`` goes back to the client as is (multi round-trip requests,
  SEP-2322); the client retries with ``inputResponses`` and the SDK unseals ``requestState``, which it
  sealed (AES-GCM, bound to method, target and arguments) on the way out;
* handshake era: there is no ``input_required`` result, so each requested input is sent as a real
  server-to-client request (``elicitation/create``, ``sampling/createMessage``, ``roots/list``) on the
  request's own stream, and the flow is re-run with the answers, all within the one call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    INTERNAL_ERROR,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequest,
    InputRequiredResult,
    InputResponse,
    ListRootsRequest,
    ListRootsResult,
    SamplingMessage,
    TextContent,
)

from conformance_fixture.common import is_modern

T = TypeVar("T")

MAX_LEGACY_ROUNDS = 8
"""Upper bound on in-call rounds on the handshake era (a flow that never converges is a fixture bug)."""


@dataclass(frozen=True)
class Round:
    """What a flow sees on one round of a request."""

    capabilities: ClientCapabilities | None
    responses: Mapping[str, InputResponse]
    state: str | None

    def elicited(self, key: str) -> ElicitResult | None:
        answer = self.responses.get(key)
        return answer if isinstance(answer, ElicitResult) else None

    def sampled_text(self, key: str) -> str | None:
        answer = self.responses.get(key)
        if isinstance(answer, CreateMessageResult) and isinstance(answer.content, TextContent):
            return answer.content.text
        if isinstance(answer, CreateMessageResultWithTools):
            texts = [block.text for block in answer.content_as_list if isinstance(block, TextContent)]
            return " ".join(texts) if texts else None
        return None

    def roots(self, key: str) -> ListRootsResult | None:
        answer = self.responses.get(key)
        return answer if isinstance(answer, ListRootsResult) else None


def form(message: str, properties: dict[str, Any], *, required: list[str] | None = None) -> ElicitRequest:
    """A form-mode ``elicitation/create`` request over a flat object schema."""
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def sample(prompt: str, *, max_tokens: int = 64) -> CreateMessageRequest:
    """A ``sampling/createMessage`` request with one user message."""
    message = SamplingMessage(role="user", content=TextContent(type="text", text=prompt))
    return CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=max_tokens))


def list_roots() -> ListRootsRequest:
    """A ``roots/list`` request."""
    return ListRootsRequest()


def _first_round(ctx: Context) -> Round:
    return Round(ctx.client_capabilities, dict(ctx.input_responses or {}), ctx.request_state)


async def _ask_directly(ctx: Context, requests: Mapping[str, InputRequest]) -> dict[str, InputResponse]:
    """Handshake era: send each input request to the client on this request's stream."""
    related = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    answers: dict[str, InputResponse] = {}
    for key, request in requests.items():
        if isinstance(request, ElicitRequest):
            answers[key] = await ctx.session.send_request(request, ElicitResult, metadata=related)
        elif isinstance(request, CreateMessageRequest):
            answers[key] = await ctx.session.send_request(request, CreateMessageResult, metadata=related)
        else:
            answers[key] = await ctx.session.send_request(request, ListRootsResult, metadata=related)
    return answers


async def converse(ctx: Context, flow: Callable[[Round], T | InputRequiredResult]) -> T | InputRequiredResult:
    """Run ``flow`` for the current request in whichever way its protocol era allows."""
    current = _first_round(ctx)
    outcome = flow(current)
    if is_modern(ctx):
        return outcome
    for _ in range(MAX_LEGACY_ROUNDS):
        if not isinstance(outcome, InputRequiredResult):
            return outcome
        answers = await _ask_directly(ctx, outcome.input_requests or {})
        current = Round(current.capabilities, answers, outcome.request_state)
        outcome = flow(current)
    if isinstance(outcome, InputRequiredResult):
        raise MCPError(code=INTERNAL_ERROR, message="fixture flow did not converge")
    return outcome
