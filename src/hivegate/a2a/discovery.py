"""Discovery: the A2A cards of the agents a caller may see, filtered and paginated.

One search (:class:`AgentDiscovery`) serves two surfaces: ``GET /api/v1/agents`` (:class:`DiscoveryEndpoint`)
and the ``discover_agents`` tool of the user-level MCP endpoint ``/mcp`` (:mod:`hivegate.mcp.user_handlers`).

**Visible** (:func:`visible`): an agent with ``a2a_enabled`` (an agent without it has no card) whose
``visibility`` is ``"public"`` (any authenticated caller), or which the caller may reach
(:meth:`~hivegate.auth.principal.Principal.may_reach`: its owner's ``oag_`` keys, OAuth grants naming
it, its own ``bak_`` keys). Visible means listed with its card, nothing more: calling the agent stays
the gate's decision (:mod:`hivegate.auth.gate`), so another user's public agent is listed but answers
404 on its endpoints.

**Filters** match the card as served: ``tag`` any skill's tags (exactly), ``skill`` any skill's id
(exactly), ``q`` a case-insensitive substring of the card's ``name`` or ``description``; all given
filters must match. **Order**: by agent id. **Pages**: ``limit`` cards (1..100, default 20) from the
offset a signed cursor names (:class:`~hivegate.mcp.pagination.CursorCodec`); the cursor is bound to the
caller (credential kind and user) and to the filters, so another caller's, another query's, a forged
or a tampered cursor is ``invalid_cursor`` (400); a list that shrank between pages yields a shorter
page, never another caller's agents (the list is recomputed for the caller on every page).

REST errors are the A2A HTTP+JSON shape of the card endpoints (:func:`~hivegate.a2a.rendering.a2a_error_response`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from hivegate.a2a.card import agent_card, card_document
from hivegate.a2a.rendering import a2a_error_response
from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.errors import GatewayError, InvalidParamsError, MethodNotAllowedError
from hivegate.mcp.pagination import CursorCodec
from hivegate.mcp.transport import decode_headers

__all__ = [
    "DEFAULT_LIMIT",
    "DISCOVERY_PATH",
    "MAX_FILTER_CHARS",
    "MAX_LIMIT",
    "AgentDiscovery",
    "DiscoveryEndpoint",
    "DiscoveryPage",
    "visible",
]

DISCOVERY_PATH = "/api/v1/agents"
DEFAULT_LIMIT = 20
"""Cards per page when ``limit`` is not given (the original's ``listAgents`` default)."""
MAX_LIMIT = 100
MAX_FILTER_CHARS = 256
"""The longest ``tag``, ``skill`` or ``q`` accepted (longer → ``invalid_params``)."""
MAX_CURSOR_CHARS = 512


def visible(principal: Principal, spec: AgentSpec) -> bool:
    """Whether discovery shows ``spec`` to ``principal`` (module docstring)."""
    if not spec.a2a_enabled:
        return False
    return spec.visibility == "public" or principal.may_reach(spec.id, spec.owner)


class DiscoveryPage:
    """One page: the cards (A2A card documents, as the card endpoint serves them) and the next cursor."""

    __slots__ = ("cards", "next_cursor")

    def __init__(self, cards: list[dict[str, Any]], next_cursor: str | None) -> None:
        self.cards = cards
        self.next_cursor = next_cursor

    def document(self) -> dict[str, Any]:
        """``{"agents": [card, …], "nextCursor": "…"}`` (``nextCursor`` left out on the last page)."""
        body: dict[str, Any] = {"agents": self.cards}
        if self.next_cursor is not None:
            body["nextCursor"] = self.next_cursor
        return body


def _text(name: str, value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_FILTER_CHARS:
        raise InvalidParamsError(f"{name} must be a string of at most {MAX_FILTER_CHARS} characters")
    return value


def _limit(value: object) -> int:
    if value is None or value == "":
        return DEFAULT_LIMIT
    if isinstance(value, bool):
        raise InvalidParamsError(f"limit must be an integer in 1..{MAX_LIMIT}")
    if isinstance(value, str):
        if not value.isascii() or not value.isdigit() or len(value) > 4:
            raise InvalidParamsError(f"limit must be an integer in 1..{MAX_LIMIT}")
        value = int(value)
    if not isinstance(value, int) or not 1 <= value <= MAX_LIMIT:
        raise InvalidParamsError(f"limit must be an integer in 1..{MAX_LIMIT}")
    return value


def _cursor(value: object) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > MAX_CURSOR_CHARS:
        raise InvalidParamsError("Invalid cursor")
    return value


class AgentDiscovery:
    """The search over ``registry``; cards name URLs under ``base``; ``codec`` signs cursors."""

    def __init__(self, registry: AgentRegistry, base: str, codec: CursorCodec) -> None:
        self._registry = registry
        self._base = base
        self._codec = codec
        self._cards: dict[str, tuple[AgentSpec, dict[str, Any]]] = {}

    def _card(self, spec: AgentSpec) -> dict[str, Any]:
        cached = self._cards.get(spec.id)
        if cached is None or cached[0] is not spec:
            cached = (spec, card_document(agent_card(spec, self._base)))
            self._cards[spec.id] = cached
        return cached[1]

    def search(self, principal: Principal, arguments: Mapping[str, object]) -> DiscoveryPage:
        """The page ``arguments`` (``tag``, ``skill``, ``q``, ``cursor``, ``limit``; others ignored) asks for.

        Raises:
            InvalidParamsError: a filter or ``limit`` out of bounds; ``InvalidCursorError`` (its subclass)
                for a cursor that is malformed, forged, or another caller's or query's.
        """
        tag = _text("tag", arguments.get("tag"))
        skill = _text("skill", arguments.get("skill"))
        q = _text("q", arguments.get("q"))
        limit = _limit(arguments.get("limit"))
        cursor = _cursor(arguments.get("cursor"))
        scope = json.dumps([DISCOVERY_PATH, principal.kind, principal.user_id, tag, skill, q])
        self._codec.decode(scope, cursor)  # refuse a bad cursor before any work
        needle = q.casefold() if q is not None else None
        specs = sorted(self._registry.all(), key=lambda s: s.id)
        known = {s.id for s in specs}
        for gone in [k for k in self._cards if k not in known]:
            del self._cards[gone]
        cards = [
            card
            for card in (self._card(spec) for spec in specs if visible(principal, spec))
            if _matches(card, tag, skill, needle)
        ]
        page = self._codec.paginate(scope, cards, cursor, limit)
        return DiscoveryPage(page.items, page.next_cursor)


def _matches(card: Mapping[str, Any], tag: str | None, skill: str | None, needle: str | None) -> bool:
    skills: list[Mapping[str, Any]] = card.get("skills", [])
    if tag is not None and not any(tag in s.get("tags", ()) for s in skills):
        return False
    if skill is not None and not any(s.get("id") == skill for s in skills):
        return False
    if needle is not None:
        text = f"{card.get('name', '')}\n{card.get('description', '')}".casefold()
        if needle not in text:
            return False
    return True


_NO_STORE = {"Cache-Control": "private, no-store", "Vary": "Authorization"}


class DiscoveryEndpoint:
    """ASGI app of ``GET /api/v1/agents`` (``HEAD`` too); other methods 405 ``method_not_allowed``.

    Credentials: :meth:`~hivegate.auth.gate.EndpointGate.admit_discovery` (``oag_``, ``bak_``, an OAuth token
    for ``/mcp``); without one 401 with ``WWW-Authenticate``. The answer depends on the caller: never
    shared by caches (``Cache-Control: private, no-store``).
    """

    def __init__(self, discovery: AgentDiscovery, gate: EndpointGate) -> None:
        self._discovery = discovery
        self._gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            response = await self._serve(request)
        except GatewayError as error:
            response = a2a_error_response(error)
        await response(scope, receive, send)

    async def _serve(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            error = MethodNotAllowedError(f"{request.method[:20]} is not allowed here; use GET")
            error.headers["Allow"] = "GET, HEAD"
            raise error
        principal = await self._gate.admit_discovery(decode_headers(request.scope))
        query = request.query_params
        arguments = {name: query.get(name) for name in ("tag", "skill", "q", "cursor", "limit")}
        page = self._discovery.search(principal, arguments)
        return JSONResponse(page.document(), headers=_NO_STORE)
