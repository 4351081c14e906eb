"""Which of an upstream MCP server's tools and prompts an ``mcp`` agent shows, and under which names.

The ``mcp`` backend's selection (:class:`~hivegate.agents.model.McpBackendSpec`: ``include_tools``,
``exclude_tools``, ``include_prompts``, ``exclude_prompts``, ``prefix``): each upstream list page is
filtered and renamed as it arrives (its cursor kept, so every page is read as before), and a call's name
is mapped back before it goes upstream. A name the agent does not show is refused as unknown, as the
spec says: -32602 (Spec: MCP 2025-11-25 server/tools#error-handling, server/prompts#error-handling,
server/utilities/completion#error-handling).

An upstream tool whose name, or prefixed name, is not a valid tool name (Spec: MCP 2025-11-25
server/tools#tool-names: 1–128 of ``[A-Za-z0-9_.-]``) is left out, and reported so it can be logged: one
bad tool does not hide the others. Resources and resource templates pass as they are (URIs are the
upstream's own namespace).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import mcp_types as types

from hivegate.agents.model import TOOL_NAME_PATTERN, McpBackendSpec
from hivegate.errors import UnknownPromptError, UnknownToolError

__all__ = ["Kind", "UpstreamNames"]

Kind = Literal["tool", "prompt"]

_TOOL_NAME = re.compile(TOOL_NAME_PATTERN)


class UpstreamNames:
    """An ``mcp`` agent's selection of its upstream's tools and prompts (module docstring).

    Args:
        prefix: put before every tool and prompt name shown ("" for none).
        include_tools: the only upstream tools shown; None: every one.
        exclude_tools: upstream tools not shown (after ``include_tools``).
        include_prompts: the only upstream prompts shown; None: every one.
        exclude_prompts: upstream prompts not shown (after ``include_prompts``).
    """

    def __init__(
        self,
        *,
        prefix: str = "",
        include_tools: Iterable[str] | None = None,
        exclude_tools: Iterable[str] = (),
        include_prompts: Iterable[str] | None = None,
        exclude_prompts: Iterable[str] = (),
    ) -> None:
        self.prefix = prefix
        self._include: dict[Kind, frozenset[str] | None] = {
            "tool": None if include_tools is None else frozenset(include_tools),
            "prompt": None if include_prompts is None else frozenset(include_prompts),
        }
        self._exclude: dict[Kind, frozenset[str]] = {
            "tool": frozenset(exclude_tools),
            "prompt": frozenset(exclude_prompts),
        }

    @classmethod
    def of(cls, spec: McpBackendSpec) -> UpstreamNames:
        """The selection ``spec`` declares."""
        return cls(
            prefix=spec.prefix or "",
            include_tools=spec.include_tools,
            exclude_tools=spec.exclude_tools,
            include_prompts=spec.include_prompts,
            exclude_prompts=spec.exclude_prompts,
        )

    def selected(self, kind: Kind, name: str) -> bool:
        """Whether the upstream's ``kind`` named ``name`` (its own name) is shown, by the lists alone."""
        included = self._include[kind]
        return (included is None or name in included) and name not in self._exclude[kind]

    def shown(self, kind: Kind, name: str) -> str | None:
        """The name the agent shows for the upstream's ``kind`` named ``name``; None when it is not shown
        (the lists leave it out; a tool: it, or its prefixed name, is not a valid tool name)."""
        if not self.selected(kind, name):
            return None
        shown = self.prefix + name
        if kind == "tool" and not (_TOOL_NAME.fullmatch(name) and _TOOL_NAME.fullmatch(shown)):
            return None
        return shown

    def upstream(self, kind: Kind, shown: str) -> str | None:
        """The upstream's own name of the ``kind`` the agent shows as ``shown``; None when the agent shows
        none by that name (no prefix, or an upstream name the lists leave out)."""
        if not shown.startswith(self.prefix):
            return None
        name = shown[len(self.prefix) :]
        return name if self.shown(kind, name) == shown else None

    def select(self, method: str, page: Any) -> tuple[Any, list[str]]:
        """An upstream list page (``tools/list`` or ``prompts/list``; any other as it is) with only the items
        the agent shows, under the names it shows them by, the page's cursor and ``_meta`` kept; and the
        upstream tool names left out because they are not valid tool names (to log)."""
        if method == "tools/list" and isinstance(page, types.ListToolsResult):
            tools: list[types.Tool] = []
            invalid: list[str] = []
            for tool in page.tools:
                shown = self.shown("tool", tool.name)
                if shown is not None:
                    tools.append(tool if shown == tool.name else tool.model_copy(update={"name": shown}))
                elif self.selected("tool", tool.name):
                    invalid.append(tool.name)
            return page.model_copy(update={"tools": tools}), invalid
        if method == "prompts/list" and isinstance(page, types.ListPromptsResult) and self._changes("prompt"):
            prompts = [
                prompt if not self.prefix else prompt.model_copy(update={"name": self.prefix + prompt.name})
                for prompt in page.prompts
                if self.selected("prompt", prompt.name)
            ]
            return page.model_copy(update={"prompts": prompts}), []
        return page, []

    def upstream_params(self, method: str, params: Mapping[str, Any]) -> Mapping[str, Any]:
        """A call's ``params`` with the name the agent shows replaced by the upstream's own: ``tools/call``
        and ``prompts/get`` (``name``), ``completion/complete`` of a prompt (``ref.name``); any other as
        it is.

        Raises:
            UnknownToolError: ``tools/call`` of a tool the agent does not show (``data``: ``{"name": …}``).
            UnknownPromptError: ``prompts/get`` or a completion of a prompt it does not show.
        """
        if method == "tools/call":
            shown = params.get("name")
            name = self.upstream("tool", shown) if isinstance(shown, str) else None
            if name is None:
                raise UnknownToolError(f"Unknown tool: {shown}", data={"name": shown})
            return params if name == shown else {**params, "name": name}
        if not self._changes("prompt"):
            return params
        if method == "prompts/get":
            shown = params.get("name")
            name = self.upstream("prompt", shown) if isinstance(shown, str) else None
            if name is None:
                raise UnknownPromptError(f"Unknown prompt: {shown}", data={"name": shown})
            return {**params, "name": name}
        ref = params.get("ref")
        if method == "completion/complete" and isinstance(ref, Mapping) and ref.get("type") == "ref/prompt":
            shown = ref.get("name")  # pyright: ignore[reportUnknownMemberType]  # a JSON object
            name = self.upstream("prompt", shown) if isinstance(shown, str) else None
            if name is None:
                raise UnknownPromptError(f"Unknown prompt: {shown}", data={"name": shown})
            return {**params, "ref": {**ref, "name": name}}
        return params

    def _changes(self, kind: Kind) -> bool:
        return bool(self.prefix) or self._include[kind] is not None or bool(self._exclude[kind])
