"""hivegate: a self-hostable gateway that serves registered agents as MCP servers.

Public surface: :func:`create_app`, :class:`Settings`, :func:`load_settings`, the
:class:`Invocation` a python backend receives, :class:`AgentError` it may raise, and
``__version__``.
"""

from hivegate.app import create_app
from hivegate.backends.base import Attachment, Invocation
from hivegate.errors import AgentError
from hivegate.settings import Settings, load_settings

__all__ = ["AgentError", "Attachment", "Invocation", "Settings", "__version__", "create_app", "load_settings"]

__version__ = "0.1.0"
