"""An agent's own tools: the message tool (named after the agent) and its skills exposed as tools.

Spec: MCP 2026-07-28 server/tools. Tool names are 1–64 characters of ``[A-Za-z0-9_.-]``;
agent and skill ids are validated to that alphabet when an agent is registered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mcp_types import Tool

from hivegate.agents.model import AgentSpec, SkillSpec
from hivegate.auth.principal import current_principal
from hivegate.backends.base import Attachment, Invocation
from hivegate.errors import InvalidParamsError
from hivegate.files.attachments import MAX_ATTACHMENTS, file_reference

__all__ = ["MESSAGE_TOOL_SCHEMA", "build_invocation", "message_tool", "skill_tool"]

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

MESSAGE_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "What to ask or tell the agent."},
        "context_id": {"type": "string", "description": "Continue an earlier conversation with this agent."},
        "attachments": {
            "type": "array",
            "items": _ATTACHMENT_SCHEMA,
            "maxItems": MAX_ATTACHMENTS,
            "description": "Files sent with the message.",
        },
    },
    "required": ["message"],
}

_SKILL_DEFAULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"message": {"type": "string", "description": "Input for this skill."}},
    "required": ["message"],
}


def message_tool(spec: AgentSpec) -> Tool:
    """The agent's message tool: ``message`` (required), ``context_id`` and ``attachments`` (optional)."""
    return Tool(
        name=spec.id,
        title=spec.name,
        description=spec.description or f"Send a message to the {spec.name} agent and get its reply.",
        input_schema=MESSAGE_TOOL_SCHEMA,
    )


def skill_tool(skill: SkillSpec) -> Tool:
    """The tool for a skill marked ``expose_as_tool``; its schema is the skill's ``inputSchema`` or a ``message``."""
    return Tool(
        name=skill.id,
        title=skill.name,
        description=skill.description or skill.name,
        input_schema=skill.input_schema or _SKILL_DEFAULT_SCHEMA,
    )


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


def build_invocation(spec: AgentSpec, skill: SkillSpec | None, arguments: Mapping[str, Any]) -> Invocation:
    """Turn tool arguments into an :class:`Invocation`.

    Raises:
        InvalidParamsError: ``message`` is missing or not a string where required, or
            ``context_id`` / ``attachments`` have the wrong type.
    """
    message = arguments.get("message")
    if skill is None or skill.input_schema is None:
        if not isinstance(message, str):
            raise InvalidParamsError("'message' is required and must be a string")
    elif not isinstance(message, str):
        message = json.dumps(dict(arguments), separators=(",", ":"), sort_keys=True)
    context_id = arguments.get("context_id")
    if context_id is not None and not isinstance(context_id, str):
        raise InvalidParamsError("'context_id' must be a string")
    return Invocation(
        agent_id=spec.id,
        message=message,
        arguments=dict(arguments),
        skill_id=skill.id if skill else None,
        context_id=context_id,
        attachments=_attachments(arguments.get("attachments")),
        principal=current_principal(),
    )
