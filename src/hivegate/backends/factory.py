"""The backend an agent's spec names, by its ``type`` (``python``, ``a2a``, ``mcp``)."""

from __future__ import annotations

from hivegate.agents.model import A2ABackendSpec, AgentSpec, McpBackendSpec
from hivegate.backends.a2a import A2ABackend
from hivegate.backends.base import Backend
from hivegate.backends.mcp_upstream import McpUpstreamBackend
from hivegate.backends.python import create_python_backend

__all__ = ["create_backend"]


def create_backend(spec: AgentSpec) -> Backend | None:
    """The backend of ``spec`` (not yet started); None when the agent has none.

    Raises:
        BackendLoadError: a ``python`` backend's target cannot be imported or has the wrong type.
    """
    backend = spec.backend
    if backend is None:
        return None
    if isinstance(backend, A2ABackendSpec):
        return A2ABackend(spec.id, backend)
    if isinstance(backend, McpBackendSpec):
        return McpUpstreamBackend(spec.id, backend)
    return create_python_backend(spec)
