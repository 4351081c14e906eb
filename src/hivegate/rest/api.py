"""``/api/…``: the REST plane's collections, each under its own path (the rest is 404 in the REST envelope).

``/api/v1/files`` (:mod:`hivegate.rest.files`) and ``/api/v1/conversations``
(:mod:`hivegate.rest.conversations`); ``/api/v1/agents`` (discovery) is routed exactly, before this.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.types import ASGIApp, Receive, Scope, Send

from hivegate.errors import NotFoundError
from hivegate.rest.rendering import rest_error_response

__all__ = ["ApiEndpoint"]


class ApiEndpoint:
    """Dispatches ``/api/…`` by path prefix (module docstring).

    Args:
        collections: path (``/api/v1/files``) → the ASGI app of that path and everything below it.
    """

    def __init__(self, collections: Mapping[str, ASGIApp]) -> None:
        self._collections = dict(collections)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope["path"]
        for prefix, app in self._collections.items():
            if path == prefix or path.startswith(prefix + "/"):
                await app(scope, receive, send)
                return
        await rest_error_response(NotFoundError("No such path under /api"))(scope, receive, send)
