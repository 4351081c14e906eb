"""An agent's declared prompts: listing, argument checks and rendering.

Spec: MCP 2026-07-28 server/prompts. An unknown prompt, a missing required argument or a
non-string argument value is -32602 (the official SDK answers -32603 / code 0 here; hivegate
follows the spec).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_types import GetPromptResult, Prompt, PromptArgument, PromptMessage, TextContent

from hivegate.agents.model import PromptSpec
from hivegate.errors import InvalidParamsError
from hivegate.mcp.placeholders import fill_placeholders

__all__ = ["check_prompt_arguments", "prompt_descriptor", "render_prompt"]


def prompt_descriptor(spec: PromptSpec) -> Prompt:
    """The ``prompts/list`` entry for ``spec``."""
    return Prompt(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        arguments=[PromptArgument(name=a.name, description=a.description, required=a.required) for a in spec.arguments]
        or None,
    )


def check_prompt_arguments(prompt: Prompt, arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """Validate ``arguments`` against ``prompt``: values must be strings and required ones present.

    Returns:
        The declared arguments that were given. Undeclared ones are dropped, for hivegate's own
        prompts and a backend server's alike (a backend never sees an argument its prompt did
        not declare, so it cannot fail on one).

    Raises:
        InvalidParamsError: a value is not a string, or a required argument is missing.
    """
    given = dict(arguments or {})
    bad = sorted(k for k, v in given.items() if not isinstance(v, str))
    if bad:
        raise InvalidParamsError(f"Prompt argument values must be strings: {', '.join(bad)}")
    missing = [a.name for a in prompt.arguments or () if a.required and a.name not in given]
    if missing:
        names = ", ".join(missing)
        raise InvalidParamsError(f"Missing required arguments for prompt {prompt.name!r}: {names}")
    declared = {a.name for a in prompt.arguments or ()}
    return {k: v for k, v in given.items() if k in declared}


def render_prompt(spec: PromptSpec, arguments: Mapping[str, str]) -> GetPromptResult:
    """Fill ``spec``'s message templates with ``arguments`` (``{name}``; absent optional ones become "")."""
    values = {a.name: arguments.get(a.name, "") for a in spec.arguments}
    messages: list[PromptMessage] = []
    for message in spec.messages:
        text = fill_placeholders(message.text, values)
        messages.append(PromptMessage(role=message.role, content=TextContent(type="text", text=text)))
    return GetPromptResult(description=spec.description, messages=messages)
