"""What a grant of one agent covers, for people: the names of its tools, resources and prompts.

The consent page (:mod:`hivegate.auth.oauth.server`) shows this per agent. :func:`agent_coverage`
starts the agent's runtime (as its first request would), so an agent whose backend cannot start
is reported as None and not offered; :func:`spec_coverage` reads the spec alone (no backend
server's own items).
"""

from __future__ import annotations

from dataclasses import dataclass

from hivegate.agents.model import AgentSpec, PythonBackendSpec
from hivegate.backends.python import SdkServerBackend
from hivegate.errors import AgentServiceUnavailableError
from hivegate.mcp.host import AgentHost

__all__ = ["GrantCoverage", "agent_coverage", "spec_coverage"]


@dataclass(frozen=True, slots=True)
class GrantCoverage:
    """Names of what a grant of one agent reaches.

    Attributes:
        tools: tool names (the message tool, skill tools, a backend server's tools).
        resources: resource and resource-template names the agent declares or its server lists
            (the two built-in ``hivegate://agent/…`` resources every agent has are left out).
        prompts: prompt names.
        unlisted: the agent's backend server may offer more than listed (a low-level SDK server,
            whose lists need a request to produce).
    """

    tools: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    prompts: tuple[str, ...] = ()
    unlisted: bool = False


def _unique(*groups: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))


def spec_coverage(spec: AgentSpec) -> GrantCoverage:
    """What the spec itself declares: the message tool (a ``callable`` backend), skill tools, resources,
    templates and prompts. A ``server`` backend's own items are not known from the spec (``unlisted``)."""
    backend = spec.backend if isinstance(spec.backend, PythonBackendSpec) else None
    tools: list[str] = []
    if backend is not None and backend.callable is not None:
        tools = [spec.id, *(skill.id for skill in spec.skills if skill.expose_as_tool)]
    resources = [r.name for r in spec.resources] + [t.name for t in spec.resource_templates]
    unlisted = backend is not None and backend.server is not None
    return GrantCoverage(_unique(tools), _unique(resources), _unique([p.name for p in spec.prompts]), unlisted)


async def agent_coverage(host: AgentHost, spec: AgentSpec) -> GrantCoverage | None:
    """The coverage of the agent as it runs, or None when it is not registered or cannot start.

    Starting it is what its first request would do (the runtime is kept); a backend that fails is
    retried later per :meth:`AgentHost.runtime`.
    """
    try:
        runtime = await host.runtime(spec.id)
    except AgentServiceUnavailableError:
        return None
    if runtime is None:
        return None
    view = runtime.view
    own = spec_coverage(view.spec)
    tools = [tool.name for tool in view.own_tools]
    backend = view.backend
    if not isinstance(backend, SdkServerBackend):
        return GrantCoverage(_unique(tools), own.resources, own.prompts)
    try:
        names = await backend.feature_names()
    except Exception:  # the agent's own list handlers failed: say less rather than refuse the page
        names = None
    if names is None:
        return GrantCoverage(_unique(tools), own.resources, own.prompts, unlisted=True)
    server_tools, server_resources, server_prompts = names
    return GrantCoverage(
        _unique(tools, server_tools),
        _unique(list(own.resources), server_resources),
        _unique(list(own.prompts), server_prompts),
    )
