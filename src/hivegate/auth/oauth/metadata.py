"""The authorization server's discovery documents and their ``/.well-known/*`` endpoints.

``GET /.well-known/oauth-authorization-server`` is the RFC 8414 metadata; the
``/.well-known/oauth-protected-resource`` family is RFC 9728 protected-resource metadata for the
gateway as a whole, the user-level endpoint ``/mcp`` and each agent's endpoint (both of its URL
forms), built by :func:`~hivegate.auth.oauth.resource_metadata.protected_resource_metadata`. All
are public (CORS ``*``) and cacheable for an hour.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from mcp.shared.auth import OAuthMetadata
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from hivegate.auth.oauth.endpoints import endpoint
from hivegate.auth.oauth.provider import AGENT_ID_RE
from hivegate.auth.oauth.resource_metadata import protected_resource_metadata
from hivegate.auth.urls import agent_resource, user_resource

__all__ = ["MetadataEndpoints", "authorization_server_metadata"]

_CACHED = {"Cache-Control": "public, max-age=3600"}


def authorization_server_metadata(issuer: str, *, cimd: bool) -> dict[str, Any]:
    """RFC 8414 §2 metadata of the server at ``issuer`` (JSON-ready; validated as the SDK's clients parse it).

    S256 only (RFC 7636), ``none`` among the token and revocation endpoint auth methods (public
    clients), ``authorization_response_iss_parameter_supported`` (RFC 9207) and, with ``cimd``,
    ``client_id_metadata_document_supported``.
    """
    auth_methods = ["none", "client_secret_post", "client_secret_basic"]
    metadata: dict[str, Any] = {
        "issuer": issuer,
        "authorization_endpoint": f"{issuer}/oauth/authorize",
        "token_endpoint": f"{issuer}/oauth/token",
        "registration_endpoint": f"{issuer}/oauth/register",
        "revocation_endpoint": f"{issuer}/oauth/revoke",
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": auth_methods,
        "revocation_endpoint_auth_methods_supported": auth_methods,
        "authorization_response_iss_parameter_supported": True,
    }
    if cimd:
        metadata["client_id_metadata_document_supported"] = True
    OAuthMetadata.model_validate(metadata)  # the shape the SDK's clients parse
    return metadata


class MetadataEndpoints:
    """The ``/.well-known/*`` documents of the server at ``issuer`` (no trailing slash)."""

    def __init__(self, issuer: str, *, cimd: bool) -> None:
        self.issuer = issuer
        self.metadata = authorization_server_metadata(issuer, cimd=cimd)

    def routes(self) -> list[BaseRoute]:
        """Their routes, in matching order (``…/mcp`` before ``…/{agent_id}/mcp``)."""
        get = ["GET", "OPTIONS"]
        handlers: dict[str, Callable[[Request], Awaitable[Response]]] = {
            "/.well-known/oauth-authorization-server": self._as_metadata,
            "/.well-known/oauth-protected-resource": self._root_resource_metadata,
            "/.well-known/oauth-protected-resource/mcp": self._user_resource_metadata,
            "/.well-known/oauth-protected-resource/agents/{agent_id}/mcp": self._alias_resource_metadata,
            "/.well-known/oauth-protected-resource/{agent_id}/mcp": self._agent_resource_metadata,
        }
        return [
            Route(path, endpoint(handler, limit=DEFAULT_MAX_REQUEST_BODY_SIZE, cors=get), methods=get)
            for path, handler in handlers.items()
        ]

    async def _as_metadata(self, request: Request) -> Response:
        return JSONResponse(self.metadata, headers=_CACHED)

    async def _user_resource_metadata(self, request: Request) -> Response:
        return self._resource_metadata(user_resource(self.issuer), None)

    async def _root_resource_metadata(self, request: Request) -> Response:
        return self._resource_metadata(self.issuer, None)

    async def _agent_resource_metadata(self, request: Request) -> Response:
        return self._agent_metadata(request, lambda agent_id: agent_resource(self.issuer, agent_id))

    async def _alias_resource_metadata(self, request: Request) -> Response:
        return self._agent_metadata(request, lambda agent_id: f"{self.issuer}/agents/{agent_id}/mcp")

    def _agent_metadata(self, request: Request, resource: Callable[[str], str]) -> Response:
        """The document of the agent endpoint ``resource(agent_id)``, for any syntactically valid id
        (existing or not: existence does not leak); 404 for other ids."""
        agent_id: str = request.path_params["agent_id"]
        if AGENT_ID_RE.fullmatch(agent_id) is None:
            return JSONResponse({"error": "not_found"}, status_code=404)
        return self._resource_metadata(resource(agent_id), agent_id)

    def _resource_metadata(self, resource: str, agent_id: str | None) -> Response:
        """RFC 9728 §2 metadata for ``resource`` (built by :func:`protected_resource_metadata`)."""
        return JSONResponse(protected_resource_metadata(self.issuer, resource, agent_id), headers=_CACHED)
