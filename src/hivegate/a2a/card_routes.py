"""The agent-card endpoints: every agent's public card, the gateway's root card, the legacy discovery paths.

Paths (``docs/a2a.md``), all public (no credential is read) except a private agent's card, all URLs
in bodies and ``Location`` headers built from ``base`` (``server.public_url``), never from ``Host``:

- ``/{agentId}/.well-known/agent-card.json`` and ``/agents/{agentId}/.well-known/agent-card.json``:
  the agent's card (:func:`~hivegate.a2a.card.agent_card`);
- ``/{agentId}/.well-known/agent.json`` and ``/agents/{agentId}/.well-known/agent.json`` (the
  card's name before A2A 0.3): 308 to the agent's card URL;
- ``/.well-known/agent-card.json``: the gateway's card; with ``?id={agentId}`` (the original
  platform's legacy form) 308 to that agent's card URL;
- ``/.well-known/agent.json``: 308 to the root card, or with ``?id=`` to the agent's.

``GET`` and ``HEAD`` answer; ``OPTIONS`` is a CORS preflight (204); any other method is 405
``method_not_allowed`` with ``Allow``. A card answers 200 with a strong ``ETag`` (the SHA-256 of
the body bytes), ``Cache-Control: public, max-age=300`` (:data:`CARD_MAX_AGE_SECONDS`) and CORS
``*``. A **private** agent's card (``visibility = "private"`` and ``auth = "required"``) is served only
to a credential that reaches the agent (the bindings' gate, :meth:`EndpointGate.admit_agent`), with
``Cache-Control: private`` and ``Vary: Authorization, X-Agent-API-Key``; to anyone else, credential
or not, it is the unknown agent's 404 (the original's rule: an invisible agent's card is 404).
``If-None-Match`` naming the current tag (or ``*``) answers 304 with the same headers and no
body. An unknown agent, an agent with ``a2a_enabled = false`` and a malformed id are the same 404
``agent_not_found``, rendered by :func:`~hivegate.a2a.rendering.a2a_error_response`. A card is
rebuilt only when the registry's spec of the agent changes.

Spec: A2A 1.0 §8.2 (well-known URI), §8.6 (caching: ``Cache-Control``, ``ETag``); RFC 9110 §8.8.3
(ETag), §13.1.2 (If-None-Match, weak comparison), §15.4.9 (308).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, Router
from starlette.types import Receive, Scope, Send

from hivegate.a2a.card import AGENT_CARD_PATH, agent_card, agent_card_url, card_document, gateway_card
from hivegate.a2a.rendering import a2a_error_response
from hivegate.agents.model import AGENT_ID_PATTERN, AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.gate import EndpointGate
from hivegate.errors import AgentNotFoundError, GatewayError, MethodNotAllowedError
from hivegate.mcp.transport import decode_headers

__all__ = ["CARD_MAX_AGE_SECONDS", "LEGACY_CARD_PATH", "AgentCardEndpoints", "if_none_match_selects"]

CARD_MAX_AGE_SECONDS = 300
"""How long clients and shared caches may reuse a card without revalidating (``Cache-Control: max-age``).
A change to an agent (its skills, ``a2a_enabled = false``) may take this long to reach them."""

LEGACY_CARD_PATH = "/.well-known/agent.json"
"""The card's well-known name before A2A 0.3 (``agent-card.json`` since)."""

_AGENT_ID = re.compile(AGENT_ID_PATTERN)
_PUBLIC = {"Access-Control-Allow-Origin": "*", "Access-Control-Expose-Headers": "ETag"}
_CACHE_CONTROL = f"public, max-age={CARD_MAX_AGE_SECONDS}"
_PRIVATE_CACHE_CONTROL = f"private, max-age={CARD_MAX_AGE_SECONDS}"
_ALLOW = "GET, HEAD, OPTIONS"
_PREFLIGHT = {
    "Allow": _ALLOW,
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Methods": "GET, HEAD",
    "Access-Control-Allow-Headers": "If-None-Match",
    "Access-Control-Max-Age": "86400",
}

Handler = Callable[[Request], Awaitable[Response]]


class _CardEndpoint:
    """An ASGI app for one card path, every method (Starlette routes an app, unlike a function, for all of
    them): ``GET``/``HEAD`` → ``handler``; ``OPTIONS`` → 204 with CORS (a browser's preflight of
    ``If-None-Match``); anything else → 405 ``method_not_allowed`` in the plane's shape, with ``Allow``."""

    def __init__(self, handler: Handler) -> None:
        self._handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        if request.method in ("GET", "HEAD"):
            response = await self._handler(request)
        elif request.method == "OPTIONS":
            response = Response(status_code=204, headers=_PREFLIGHT)
        else:
            error = MethodNotAllowedError(f"{request.method[:20]} is not allowed here; use GET")
            error.headers["Allow"] = _ALLOW
            response = a2a_error_response(error)
        await response(scope, receive, send)


def _card_route(path: str, handler: Handler) -> Route:
    return Route(path, _CardEndpoint(handler))


class _Served:
    """One card as sent: the body bytes and their strong ETag."""

    __slots__ = ("body", "etag")

    def __init__(self, document: Mapping[str, object]) -> None:
        self.body = orjson.dumps(document)
        self.etag = f'"{hashlib.sha256(self.body).hexdigest()}"'


class AgentCardEndpoints:
    """The card routes (module docstring) over ``registry``, naming URLs under ``base``.

    Args:
        registry: the live agents; a card reflects the spec the registry holds at request time.
        base: ``Settings.base_url()`` (no trailing slash).
        version: the gateway's version, the root card's ``version``.
        gate: admits the owner's credential for a private agent's card; without a gate every card is public.
    """

    def __init__(self, registry: AgentRegistry, base: str, version: str, gate: EndpointGate | None = None) -> None:
        self._registry = registry
        self._gate = gate
        self._base = base
        self._root = _Served(card_document(gateway_card(base, version)))
        self._cards: dict[str, tuple[AgentSpec, _Served]] = {}

    def routes(self) -> list[BaseRoute]:
        """The per-agent routes, for the gateway's Starlette app (each path segment ``{agent_id}``)."""
        return [
            _card_route(f"/{{agent_id}}{AGENT_CARD_PATH}", self._agent_card),
            _card_route(f"/agents/{{agent_id}}{AGENT_CARD_PATH}", self._agent_card),
            _card_route(f"/{{agent_id}}{LEGACY_CARD_PATH}", self._legacy_agent_card),
            _card_route(f"/agents/{{agent_id}}{LEGACY_CARD_PATH}", self._legacy_agent_card),
        ]

    def root(self) -> Router:
        """The ASGI app of the two root paths ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``
        (the route table sends those exact paths here; the rest of ``/.well-known/*`` stays OAuth's)."""
        return Router(
            routes=[
                _card_route(AGENT_CARD_PATH, self._root_card),
                _card_route(LEGACY_CARD_PATH, self._legacy_root_card),
            ],
            redirect_slashes=False,
        )

    @staticmethod
    def root_paths() -> tuple[str, ...]:
        """The exact paths :meth:`root` serves."""
        return (AGENT_CARD_PATH, LEGACY_CARD_PATH)

    @staticmethod
    def agent_documents() -> tuple[str, ...]:
        """The tails after ``/{agentId}/`` that :meth:`routes` serve (``.well-known/agent-card.json``), for
        :class:`~hivegate.routing.RouteTable` to send here even when the id is also a prefix (``oauth``)."""
        return (AGENT_CARD_PATH.removeprefix("/"), LEGACY_CARD_PATH.removeprefix("/"))

    async def _agent_card(self, request: Request) -> Response:
        agent_id: str = request.path_params["agent_id"]
        spec = self._registry.get(agent_id)
        if spec is None or not spec.a2a_enabled:
            self._cards.pop(agent_id, None)  # a deleted agent's card is not kept
            return a2a_error_response(_not_found(agent_id))
        public = self._gate is None or spec.visibility == "public" or spec.auth == "none"
        if not public and not await self._admits(request, agent_id, spec):
            return a2a_error_response(_not_found(agent_id))
        cached = self._cards.get(agent_id)
        if cached is None or cached[0] is not spec:
            cached = (spec, _Served(card_document(agent_card(spec, self._base))))
            self._cards[agent_id] = cached
        return _card_response(request, cached[1], public=public)

    async def _admits(self, request: Request, agent_id: str, spec: AgentSpec) -> bool:
        """Whether the request's credential reaches the private agent (the A2A bindings' gate). Every refusal,
        a missing or invalid credential included, is the unknown agent's 404: nothing tells a private agent
        from a missing one."""
        assert self._gate is not None
        headers = decode_headers(request.scope)
        if not any(name in ("authorization", "x-agent-api-key") for name, _ in headers):
            return False
        try:
            await self._gate.admit_agent(agent_id, spec, f"/{agent_id}/mcp", headers, a2a=True)
        except GatewayError:
            return False
        return True

    async def _root_card(self, request: Request) -> Response:
        agent_id = request.query_params.get("id")
        if agent_id is not None:
            return self._redirect_to_agent(agent_id)
        return _card_response(request, self._root)

    async def _legacy_agent_card(self, request: Request) -> Response:
        return self._redirect_to_agent(request.path_params["agent_id"])

    async def _legacy_root_card(self, request: Request) -> Response:
        agent_id = request.query_params.get("id")
        if agent_id is not None:
            return self._redirect_to_agent(agent_id)
        return _redirect(f"{self._base}{AGENT_CARD_PATH}")

    def _redirect_to_agent(self, agent_id: str) -> Response:
        """308 to the agent's card URL for a well-formed id (existing or not: the target answers that)."""
        if _AGENT_ID.fullmatch(agent_id) is None:
            return a2a_error_response(_not_found(agent_id))
        return _redirect(agent_card_url(self._base, agent_id))


def _not_found(agent_id: str) -> AgentNotFoundError:
    shown = agent_id if _AGENT_ID.fullmatch(agent_id) else f"(not an agent id: {AGENT_ID_PATTERN})"
    return AgentNotFoundError(f"No A2A agent {shown} on this gateway")


def _redirect(location: str) -> Response:
    return Response(status_code=308, headers={"Location": location, "Cache-Control": _CACHE_CONTROL, **_PUBLIC})


def _card_response(request: Request, served: _Served, *, public: bool = True) -> Response:
    headers = {"ETag": served.etag, "Cache-Control": _CACHE_CONTROL, **_PUBLIC}
    if not public:  # a private agent's card, for its owner's credential: never kept by a shared cache
        headers["Cache-Control"] = _PRIVATE_CACHE_CONTROL
        headers["Vary"] = "Authorization, X-Agent-API-Key"
    if_none_match = request.headers.get("if-none-match")
    if if_none_match is not None and if_none_match_selects(if_none_match, served.etag):
        return Response(status_code=304, headers=headers)
    return Response(served.body, media_type="application/json", headers=headers)


def if_none_match_selects(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` field value selects ``etag`` (RFC 9110 §13.1.2: ``*``, or any listed tag
    equal under the weak comparison, ``W/"x"`` and ``"x"`` alike)."""
    for candidate in if_none_match.split(","):
        tag = candidate.strip()
        if tag == "*" or tag.removeprefix("W/") == etag:
            return True
    return False
