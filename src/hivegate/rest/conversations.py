"""``/api/v1/conversations``: a caller's conversations with its agents, their messages, deleting one (issue 10 item 1).

Routes (``docs/rest.md``, "Conversations"; ``docs/calls.md``):

- ``GET /api/v1/conversations[?agent_id=&limit=&cursor=]``: the caller's conversations, the most
  recently active first: ``{"conversations": [...], "next_cursor": str | null}``; each is
  ``{conversation_id, agent_id, created_at, last_activity_at, turn_count}`` (RFC 3339 times).
  ``limit`` 1–200 (default 50); ``cursor`` is a page's ``next_cursor``.
- ``GET /api/v1/conversations/{id}``: one conversation (that document).
- ``GET /api/v1/conversations/{id}/messages[?after=&limit=]``: its turns, oldest first:
  ``{"messages": [{seq, role: "user" | "agent", text, is_error, created_at}], "next_after": int | null}``;
  ``after`` is a ``seq`` (the page starts after it), ``limit`` 1–500 (default 100).
- ``DELETE /api/v1/conversations/{id}``: 204; the conversation and its turns are gone (its
  ``context_id`` then names nothing).

Credentials: those of ``GET /api/v1/agents`` (``oag_``, ``bak_``, an OAuth token for ``/mcp``). A
caller sees its user's conversations with the agents its credential reaches (a ``bak_`` key: its one
agent; an OAuth token: the agents granted at consent). Any other conversation id is 404 ``not_found``
whether it exists or not. Errors are the REST plane's envelope.
"""

from __future__ import annotations

import base64
import binascii
from datetime import UTC, datetime
from typing import Any

import orjson
from starlette.datastructures import QueryParams
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.errors import GatewayError, InvalidCursorError, InvalidParamsError, MethodNotAllowedError, NotFoundError
from hivegate.mcp.transport import decode_headers
from hivegate.rest.rendering import rest_error_response
from hivegate.storage.calls import CallRecords, Conversation, Turn

__all__ = ["CONVERSATIONS_PATH", "ConversationsEndpoint", "conversation_document"]

CONVERSATIONS_PATH = "/api/v1/conversations"
MAX_CONVERSATIONS_PAGE = 200
MAX_MESSAGES_PAGE = 500
_NO_STORE = {"Cache-Control": "private, no-store", "Vary": "Authorization"}
_SCAN_PAGES = 10
"""Store pages read at most for one listing page when the credential reaches only some agents."""


def conversation_document(conversation: Conversation) -> dict[str, Any]:
    """``conversation`` as JSON: ``conversation_id``, ``agent_id``, ``created_at``, ``last_activity_at``
    (RFC 3339) and ``turn_count``."""
    return {
        "conversation_id": conversation.id,
        "agent_id": conversation.agent_id,
        "created_at": conversation.created_at.isoformat(),
        "last_activity_at": conversation.updated_at.isoformat(),
        "turn_count": conversation.turn_count,
    }


def _message_document(turn: Turn) -> dict[str, Any]:
    return {
        "seq": turn.seq,
        "role": str(turn.role),
        "text": turn.text,
        "is_error": turn.failed,
        "created_at": turn.at.isoformat(),
    }


def _int_param(query: QueryParams, name: str, default: int, low: int, high: int) -> int:
    raw = query.get(name)
    if raw is None:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 19 or not low <= int(raw) <= high:
        raise InvalidParamsError(f"'{name}' must be an integer from {low} to {high}", data={"param": name})
    return int(raw)


def _encode_cursor(at: datetime, conversation_id: str) -> str:
    raw = orjson.dumps([at.isoformat(), conversation_id])
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> tuple[datetime, str]:
    """An ``(updated_at, id)`` page boundary from a ``next_cursor``.

    Raises:
        InvalidCursorError: anything else.
    """
    try:
        at, conversation_id = orjson.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        moment = datetime.fromisoformat(at)
        if not isinstance(conversation_id, str) or moment.tzinfo is None or "\x00" in conversation_id:
            raise ValueError(cursor)
        moment = moment.astimezone(UTC)  # a time UTC cannot hold (year 1 at +14:00) is no cursor of ours
    except (ValueError, TypeError, OverflowError, binascii.Error, orjson.JSONDecodeError):
        raise InvalidCursorError("the cursor is not a next_cursor of this listing", data={"param": "cursor"}) from None
    return moment, conversation_id


class ConversationsEndpoint:
    """The ASGI app of ``/api/v1/conversations`` and below (module docstring).

    Args:
        records: the call records (conversations and turns). gate: the credential gate.
    """

    def __init__(self, records: CallRecords, gate: EndpointGate) -> None:
        self._records = records
        self._gate = gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self._serve(scope)
        except GatewayError as exc:
            response = rest_error_response(exc)
        await response(scope, receive, send)

    async def _serve(self, scope: Scope) -> Response:
        path: str = scope["path"]
        method: str = scope["method"]
        query = QueryParams(scope.get("query_string", b""))
        if path == CONVERSATIONS_PATH:
            principal = await self._admit(scope, method, ("GET", "HEAD"))
            return await self._list(principal, query)
        tail = (
            path.removeprefix(CONVERSATIONS_PATH + "/").split("/") if path.startswith(CONVERSATIONS_PATH + "/") else []
        )
        if len(tail) == 1 and tail[0]:
            principal = await self._admit(scope, method, ("GET", "HEAD", "DELETE"))
            conversation = await self._visible(principal, tail[0])
            if method == "DELETE":
                await self._records.delete_conversation(conversation.id, conversation.user_id)
                return Response(status_code=204, headers=_NO_STORE)
            return JSONResponse(conversation_document(conversation), headers=_NO_STORE)
        if len(tail) == 2 and tail[0] and tail[1] == "messages":
            principal = await self._admit(scope, method, ("GET", "HEAD"))
            conversation = await self._visible(principal, tail[0])
            return await self._messages(conversation, query)
        raise NotFoundError("No such path under /api")

    async def _admit(self, scope: Scope, method: str, allowed: tuple[str, ...]) -> Principal:
        if method not in allowed:
            error = MethodNotAllowedError(f"{method[:20]} is not allowed here")
            error.headers["Allow"] = ", ".join(allowed)
            raise error
        return await self._gate.admit_discovery(decode_headers(scope))

    async def _visible(self, principal: Principal, conversation_id: str) -> Conversation:
        """The conversation ``conversation_id`` when the caller may see it (module docstring).

        Raises:
            NotFoundError: otherwise, whether it exists or not.
        """
        storable = len(conversation_id) <= 64 and "\x00" not in conversation_id
        found = await self._records.conversation(conversation_id) if storable else None
        if found is None or found.user_id != principal.user_id or not _reaches(principal, found.agent_id):
            raise NotFoundError("No such conversation")
        return found

    async def _list(self, principal: Principal, query: QueryParams) -> Response:
        limit = _int_param(query, "limit", 50, 1, MAX_CONVERSATIONS_PAGE)
        agent_id = query.get("agent_id") or None
        if agent_id is not None and (len(agent_id) > 64 or "\x00" in agent_id):
            raise InvalidParamsError("'agent_id' is not an agent id", data={"param": "agent_id"})
        cursor = query.get("cursor")
        before = _decode_cursor(cursor) if cursor else None
        user = principal.user_id
        assert user is not None  # discovery admits user and agent keys and user tokens only
        if principal.agents is not None and len(principal.agents) == 1 and agent_id is None:
            (agent_id,) = principal.agents
        found: list[Conversation] = []
        more = False
        if agent_id is None or _reaches(principal, agent_id):
            # A credential that reaches only some agents filters what the store lists, a bounded number of pages.
            for _ in range(_SCAN_PAGES):
                page = await self._records.conversations(user, agent_id=agent_id, before=before, limit=limit + 1)
                more = len(page) > limit
                found.extend(item for item in page[:limit] if _reaches(principal, item.agent_id))
                if not more or len(found) >= limit:
                    break
                before = (page[limit - 1].updated_at, page[limit - 1].id)
        shown = found[:limit]
        next_cursor = None
        if shown and (more or len(found) > limit):
            next_cursor = _encode_cursor(shown[-1].updated_at, shown[-1].id)
        elif more and before is not None:  # pages of agents the credential does not reach: go on after them
            next_cursor = _encode_cursor(*before)
        body = {"conversations": [conversation_document(item) for item in shown], "next_cursor": next_cursor}
        return JSONResponse(body, headers=_NO_STORE)

    async def _messages(self, conversation: Conversation, query: QueryParams) -> Response:
        limit = _int_param(query, "limit", 100, 1, MAX_MESSAGES_PAGE)
        after = _int_param(query, "after", 0, 0, 2**62)
        turns = await self._records.turns(conversation.id, conversation.user_id, after_seq=after, limit=limit + 1)
        if turns is None:  # deleted since
            raise NotFoundError("No such conversation")
        shown = turns[:limit]
        next_after = shown[-1].seq if len(turns) > limit else None
        body = {"messages": [_message_document(turn) for turn in shown], "next_after": next_after}
        return JSONResponse(body, headers=_NO_STORE)


def _reaches(principal: Principal, agent_id: str) -> bool:
    """Whether the caller's credential reaches ``agent_id`` (None: every agent of its user)."""
    return principal.agents is None or agent_id in principal.agents
