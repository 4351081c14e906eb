"""hivegate: a self-hostable gateway that serves registered agents as MCP servers.

Public surface: :class:`Gateway` (``await Gateway.open(settings)``) and :func:`create_app` (its ASGI
app), :class:`Settings`, :func:`load_settings`, the
:class:`Invocation` a python backend receives, :class:`AgentError` it may raise, and
``__version__``. They are imported on first use, so ``import hivegate.<module>`` (the CLI's
commands) does not load the whole server.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hivegate.app import create_app
    from hivegate.backends.base import Attachment, Invocation
    from hivegate.errors import AgentError
    from hivegate.gateway import Gateway
    from hivegate.settings import Settings, load_settings

__all__ = [
    "AgentError",
    "Attachment",
    "Gateway",
    "Invocation",
    "Settings",
    "__version__",
    "create_app",
    "load_settings",
]

__version__ = "0.1.0"

_EXPORTS = {
    "create_app": "hivegate.app",
    "Gateway": "hivegate.gateway",
    "Attachment": "hivegate.backends.base",
    "Invocation": "hivegate.backends.base",
    "AgentError": "hivegate.errors",
    "Settings": "hivegate.settings",
    "load_settings": "hivegate.settings",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'hivegate' has no attribute {name!r}")
    return getattr(import_module(module), name)
