"""An agent's own tools: the message tool (named after the agent) and its skills exposed as tools.

Spec: MCP 2026-07-28 server/tools. Tool names are 1–64 characters of ``[A-Za-z0-9_.-]``;
agent and skill ids are validated to that alphabet when an agent is registered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, cast

from mcp_types import Tool

from hivegate.agents.model import AgentSpec, SkillSpec
from hivegate.auth.principal import current_principal
from hivegate.backends.base import Attachment, Invocation
from hivegate.calls.contract import (
    MAX_CONTEXT_ID_CHARS,
    MAX_KEY_CHARS,
    check_context_id_argument,
    check_idempotency_key,
)
from hivegate.errors import InvalidParamsError
from hivegate.files.attachments import MAX_ATTACHMENTS, file_reference

__all__ = ["CONTRACT_META_KEYS", "MESSAGE_TOOL_SCHEMA", "build_invocation", "call_key", "message_tool", "skill_tool"]

_ATTACHMENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "mimeType": {"type": "string"},
        "uri": {"type": "string"},
        "data": {"type": "string", "description": "Base64-encoded content."},
        "file_id": {"type": "string", "description": "A file uploaded with POST /api/v1/files (instead of uri/data)."},
        "filename": {
            "type": "string",
            "description": "The name the agent sees for the file_id (default: the upload's).",
        },
        "content_type": {"type": "string", "description": "The MIME type for the file_id (default: the upload's)."},
    },
    "additionalProperties": False,
}

_CONTEXT_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_CONTEXT_ID_CHARS,
    "description": (
        "Continue an earlier conversation with this agent: the context_id an earlier reply returned "
        "(in its structuredContent and _meta). Leave it out to start a new conversation, or, in an "
        "MCP session, to continue the session's."
    ),
}

_IDEMPOTENCY_KEY_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_KEY_CHARS,
    "description": (
        "Makes a retry safe: send the same key with the same arguments again and you get the first "
        "call's result without the agent running twice (for 24 hours). Use a new key (e.g. a UUID) "
        "for each new request; reusing one with different arguments is an error (conflict)."
    ),
}

MESSAGE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "minLength": 1, "description": "What to ask or tell the agent."},
        "context_id": _CONTEXT_ID_SCHEMA,
        "idempotency_key": _IDEMPOTENCY_KEY_SCHEMA,
        "attachments": {
            "type": "array",
            "items": _ATTACHMENT_SCHEMA,
            "maxItems": MAX_ATTACHMENTS,
            "description": "Files sent with the message: each a file_id from POST /api/v1/files, or inline uri/data.",
        },
    },
    "required": ["message"],
}
"""The message tool's ``inputSchema`` (issue 10 item 5; product-surface §3.3's uniform chat tool schema)."""

_CONTRACT_PROPERTIES = {"context_id": _CONTEXT_ID_SCHEMA, "idempotency_key": _IDEMPOTENCY_KEY_SCHEMA}

_SKILL_DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Input for this skill."}, **_CONTRACT_PROPERTIES},
    "required": ["message"],
}

CONTRACT_META_KEYS = ("context_id", "idempotency_key")
"""``params._meta`` keys a ``tools/call`` may carry these in instead of its arguments (a skill tool
whose own ``inputSchema`` is closed: ``additionalProperties`` false)."""


def message_tool(spec: AgentSpec) -> Tool:
    """The agent's message tool: ``message`` (required), ``context_id``, ``idempotency_key`` and
    ``attachments`` (optional): :data:`MESSAGE_TOOL_SCHEMA`."""
    return Tool(
        name=spec.id,
        title=spec.name,
        description=spec.description or f"Send a message to the {spec.name} agent and get its reply.",
        input_schema=MESSAGE_TOOL_SCHEMA,
    )


def skill_tool(skill: SkillSpec) -> Tool:
    """The tool for a skill marked ``expose_as_tool``: its schema is the skill's ``inputSchema`` (with
    ``context_id`` and ``idempotency_key`` added when it is an open object schema that has neither),
    or a ``message`` with those two. A closed schema is left as written: the call carries them in
    ``params._meta`` (:data:`CONTRACT_META_KEYS`)."""
    return Tool(
        name=skill.id,
        title=skill.name,
        description=skill.description or skill.name,
        input_schema=_skill_schema(skill.input_schema),
    )


def _skill_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    if schema is None:
        return _SKILL_DEFAULT_SCHEMA
    properties = schema.get("properties")
    if (
        schema.get("type") != "object"
        or schema.get("additionalProperties", True) is not True
        or not isinstance(properties, Mapping)
        or any(name in properties for name in _CONTRACT_PROPERTIES)
    ):
        return dict(schema)
    return {**schema, "properties": {**cast(Mapping[str, Any], properties), **_CONTRACT_PROPERTIES}}


def _attachments(raw: Any) -> tuple[Attachment, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(item, dict) for item in raw):
        raise InvalidParamsError("'attachments' must be an array of objects")
    return tuple(_attachment(item) for item in raw)


def _attachment(item: dict[str, Any]) -> Attachment:
    if "file_id" in item:  # an uploaded file, resolved by the call's policy (hivegate.files.attachments)
        if item.get("uri") is not None or item.get("data") is not None:
            raise InvalidParamsError("an attachment has either 'file_id' or 'uri' / 'data'")
        return file_reference(item["file_id"], item.get("filename"), item.get("content_type"))
    return Attachment(name=item.get("name"), mime_type=item.get("mimeType"), uri=item.get("uri"), data=item.get("data"))


def call_key(arguments: Mapping[str, Any], meta: Mapping[str, Any]) -> str | None:
    """The call's ``idempotency_key``: from its arguments, else from ``params._meta``; None when absent.

    Raises:
        InvalidParamsError: not a string of 1–255 characters.
    """
    return check_idempotency_key(arguments.get("idempotency_key", meta.get("idempotency_key")))


def build_invocation(
    spec: AgentSpec, skill: SkillSpec | None, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None = None
) -> Invocation:
    """Turn tool arguments into an :class:`Invocation`; ``context_id`` may come in ``params._meta`` (``meta``).

    Raises:
        InvalidParamsError: ``message`` is missing, empty or not a string where required, or
            ``context_id`` / ``attachments`` have the wrong type.
    """
    meta = meta or {}
    message = arguments.get("message")
    if skill is None or skill.input_schema is None:
        if not isinstance(message, str) or not message.strip():
            raise InvalidParamsError("'message' is required and must be a non-empty string", data={"param": "message"})
    elif not isinstance(message, str):
        message = json.dumps(dict(arguments), separators=(",", ":"), sort_keys=True)
    context_id = check_context_id_argument(arguments.get("context_id", meta.get("context_id")))
    return Invocation(
        agent_id=spec.id,
        message=message,
        arguments=dict(arguments),
        skill_id=skill.id if skill else None,
        context_id=context_id,
        attachments=_attachments(arguments.get("attachments")),
        principal=current_principal(),
    )
