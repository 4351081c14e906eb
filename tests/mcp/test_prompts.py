"""Declared prompts: descriptors, argument checks and rendering.

Spec: MCP 2026-07-28 server/prompts (argument values are strings; a missing required argument
is -32602).
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import TextContent

from hivegate.agents.model import PromptSpec
from hivegate.errors import InvalidParamsError
from hivegate.mcp.prompts import check_prompt_arguments, prompt_descriptor, render_prompt

REVIEW = PromptSpec.model_validate(
    {
        "name": "review",
        "title": "Review",
        "description": "Review some code.",
        "arguments": [
            {"name": "code", "description": "The code", "required": True},
            {"name": "focus", "required": False},
        ],
        "messages": [
            {"role": "user", "text": "Review this: {code}"},
            {"role": "assistant", "text": "Focus on {focus}; {unknown} stays as is."},
        ],
    }
)
PLAIN = PromptSpec.model_validate({"name": "plain", "messages": [{"text": "Hello."}]})


def _texts(spec: PromptSpec, arguments: dict[str, str]) -> list[tuple[str, str]]:
    result = render_prompt(spec, arguments)
    texts: list[tuple[str, str]] = []
    for message in result.messages:
        assert isinstance(message.content, TextContent)
        texts.append((message.role, message.content.text))
    return texts


def test_descriptor_lists_the_arguments() -> None:
    descriptor = prompt_descriptor(REVIEW)
    assert (descriptor.name, descriptor.title, descriptor.description) == ("review", "Review", "Review some code.")
    assert descriptor.arguments is not None
    assert [(a.name, a.description, a.required) for a in descriptor.arguments] == [
        ("code", "The code", True),
        ("focus", None, False),
    ]


def test_descriptor_without_arguments_omits_them() -> None:
    assert prompt_descriptor(PLAIN).arguments is None


def test_valid_arguments_pass_through() -> None:
    descriptor = prompt_descriptor(REVIEW)
    assert check_prompt_arguments(descriptor, {"code": "x = 1"}) == {"code": "x = 1"}
    assert check_prompt_arguments(descriptor, {"code": "", "focus": "style"}) == {"code": "", "focus": "style"}
    assert check_prompt_arguments(prompt_descriptor(PLAIN), None) == {}


@pytest.mark.parametrize("value", [1, 1.5, None, True, ["x"], {"x": "y"}])
def test_non_string_values_are_invalid_params(value: Any) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        check_prompt_arguments(prompt_descriptor(REVIEW), {"code": "x", "focus": value})
    assert refused.value.code == "invalid_params"
    assert refused.value.jsonrpc_code == -32602


def test_non_string_values_of_undeclared_arguments_are_invalid_params() -> None:
    with pytest.raises(InvalidParamsError):
        check_prompt_arguments(prompt_descriptor(REVIEW), {"code": "x", "extra": 3})


@pytest.mark.parametrize("arguments", [None, {}, {"focus": "style"}])
def test_missing_required_argument_is_invalid_params(arguments: dict[str, Any] | None) -> None:
    with pytest.raises(InvalidParamsError) as refused:
        check_prompt_arguments(prompt_descriptor(REVIEW), arguments)
    assert refused.value.code == "invalid_params"


def test_render_fills_placeholders_and_keeps_roles() -> None:
    result = render_prompt(REVIEW, {"code": "x = 1", "focus": "naming"})
    assert result.description == "Review some code."
    assert _texts(REVIEW, {"code": "x = 1", "focus": "naming"}) == [
        ("user", "Review this: x = 1"),
        ("assistant", "Focus on naming; {unknown} stays as is."),
    ]


def test_absent_optional_argument_renders_empty() -> None:
    assert _texts(REVIEW, {"code": "x"})[1] == ("assistant", "Focus on ; {unknown} stays as is.")


def test_prompt_without_arguments_renders_verbatim() -> None:
    assert _texts(PLAIN, {}) == [("user", "Hello.")]


def test_argument_values_are_inserted_literally() -> None:
    """A value that looks like a placeholder is the user's text: it must not be expanded again."""
    assert _texts(REVIEW, {"code": "print('{focus}')", "focus": "naming"})[0] == (
        "user",
        "Review this: print('{focus}')",
    )
