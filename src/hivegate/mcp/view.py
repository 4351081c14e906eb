"""The immutable, per-revision view of one agent that request handlers read.

Building a view does the per-spec work once (tool descriptors, skill index, resource
catalog, prompt index), so the hot path only does dict lookups. A spec change swaps in a
new view; requests already running keep the view they started with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp.shared.inbound import x_mcp_header_map
from mcp_types import Prompt, Tool

from hivegate.agents.model import AgentSpec, PromptSpec, SkillSpec
from hivegate.backends.base import Backend
from hivegate.calls.invoke import CallTarget
from hivegate.mcp.prompts import prompt_descriptor
from hivegate.mcp.resources import ResourceCatalog
from hivegate.mcp.tools import message_tool, skill_tool

__all__ = ["AgentView"]

MESSAGE_TOOL = None
"""Value in ``AgentView.tool_index`` for the message tool (a skill tool maps to its skill)."""


@dataclass(frozen=True, slots=True)
class AgentView:
    """Everything a request needs about one agent at one revision.

    Attributes:
        spec: the agent's spec.
        backend: the started backend, or None when the agent declares none.
        own_tools: the message tool and skill tools, in their deterministic order (none when the
            backend cannot be invoked; ``call_target`` is set exactly when there are).
        tool_index: tool name → the skill it runs (None for the message tool).
        catalog: built-in, static and templated resources.
        prompts: declared prompts by name; ``prompt_list`` their descriptors in declared order.
    """

    spec: AgentSpec
    backend: Backend | None
    own_tools: tuple[Tool, ...] = ()
    tool_index: dict[str, SkillSpec | None] = field(default_factory=dict)
    catalog: ResourceCatalog | None = None
    prompts: dict[str, PromptSpec] = field(default_factory=dict)
    prompt_list: tuple[Prompt, ...] = ()
    tool_schemas: dict[str, dict[str, Any]] = field(default_factory=dict)
    header_tools: frozenset[str] = frozenset()
    """Own tools whose schema has an ``x-mcp-header`` annotation (only those need ``Mcp-Param-*`` checks)."""
    call_target: CallTarget | None = None
    """What the invocation layer calls for the own tools (None when the backend cannot be invoked)."""

    @classmethod
    def build(cls, spec: AgentSpec, backend: Backend | None, default_page_size: int = 50) -> AgentView:
        """Derive a view; raises ``ValueError`` for a spec whose templates do not parse."""
        tools: list[Tool] = []
        index: dict[str, SkillSpec | None] = {}
        target = None
        if backend is not None and backend.can_invoke:
            target = CallTarget(spec, backend)
            tools.append(message_tool(spec))
            index[spec.id] = MESSAGE_TOOL
            for skill in spec.skills:
                if skill.expose_as_tool:
                    tools.append(skill_tool(skill))
                    index[skill.id] = skill
        return cls(
            spec=spec,
            backend=backend,
            own_tools=tuple(tools),
            tool_index=index,
            catalog=ResourceCatalog(spec, default_page_size),
            prompts={p.name: p for p in spec.prompts},
            prompt_list=tuple(prompt_descriptor(p) for p in spec.prompts),
            tool_schemas={t.name: t.input_schema for t in tools},
            header_tools=frozenset(t.name for t in tools if x_mcp_header_map(t.input_schema)),
            call_target=target,
        )

    @property
    def serves_backend(self) -> bool:
        """Whether an MCP server stands behind this agent (its features are merged in)."""
        return self.backend is not None and self.backend.has_server
