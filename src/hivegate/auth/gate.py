"""The gate in front of every MCP endpoint: who may reach which agent, and the challenge when not.

Decisions for ``/{agentId}/mcp`` (and its alias ``/agents/{agentId}/mcp``), in order:

==========================================================  ======  ==============================
situation                                                   status  ``WWW-Authenticate``
==========================================================  ======  ==============================
agent has ``auth = "none"``                                  —       (served, credentials ignored)
malformed ``Authorization``, two different credentials      401     ``error="invalid_request"``
no credential                                               401     (no error: RFC 6750 §3.1)
unknown/revoked/expired/forged key or token, user disabled  401     ``error="invalid_token"``
access token whose ``aud`` lacks this endpoint URL          401     ``error="invalid_token"``
access token without ``agent:{id}`` scope                   403     ``error="insufficient_scope"``
``bak_`` key bound to another agent                         403     ``error="insufficient_scope"``
unknown agent, or one the credential's user does not own    404     — (existence does not leak)
agent with ``mcp_enabled = false``                          403     — (code ``mcp_disabled``)
==========================================================  ======  ==============================

The A2A bindings (``a2a=True``) pass the same gate with the agent's MCP endpoint as the resource
(its audience and its metadata URL: one protected resource per agent); there ``mcp_enabled`` is not
checked, and ``a2a_enabled = false`` is 404 like an unknown agent (its card is 404 too).

Every challenge carries ``realm="hivegate"``, the endpoint's protected-resource metadata URL
(RFC 9728 §5.1) and the scope it needs: ``agent:{id}`` on an agent's endpoint, ``mcp``
(:data:`~hivegate.auth.principal.USER_SCOPE`) on the user-level endpoint ``/mcp``. 401 never
answers a disabled agent: a 401 tells an OAuth client to authorize again, and it would loop
(product surface §11 item 9).

Spec: MCP 2025-11-25 / 2026-07-28 authorization ("Protected Resource Metadata Discovery",
"Token Handling", "Error Handling"); RFC 6750 §3; RFC 8707 §2 (audience).
"""

from __future__ import annotations

from collections.abc import Iterable

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import ANONYMOUS, USER_SCOPE, CredentialKind, Principal, agent_scope
from hivegate.auth.resolver import CredentialResolver
from hivegate.auth.urls import agent_resource, resource_metadata_url, user_resource
from hivegate.errors import (
    AgentNotFoundError,
    AuthenticationError,
    GatewayError,
    InsufficientScopeError,
    McpDisabledError,
)

__all__ = ["EndpointGate", "challenge_header"]


def _quoted(value: str) -> str:
    """An RFC 7230 quoted-string body: characters that would end or escape it are dropped."""
    return "".join(c for c in value if c not in '"\\' and (c == " " or c.isprintable()))


def challenge_header(
    metadata_url: str, *, error: str | None = None, description: str | None = None, scope: str | None = None
) -> str:
    """``Bearer realm="hivegate", [error=…, error_description=…,] [scope=…,] resource_metadata="…"``."""
    parts = ['realm="hivegate"']
    if error is not None:
        parts.append(f'error="{error}"')
        if description:
            parts.append(f'error_description="{_quoted(description)}"')
    if scope is not None:
        parts.append(f'scope="{scope}"')
    parts.append(f'resource_metadata="{metadata_url}"')
    return "Bearer " + ", ".join(parts)


class EndpointGate:
    """Admit or refuse requests to the MCP endpoints; ``base`` is the gateway's public base URL."""

    def __init__(self, resolver: CredentialResolver, base: str) -> None:
        self._resolver = resolver
        self._base = base

    async def admit_agent(
        self,
        agent_id: str,
        spec: AgentSpec | None,
        path: str,
        headers: Iterable[tuple[str, str]],
        *,
        a2a: bool = False,
    ) -> Principal:
        """The principal that may use ``agent_id`` through the endpoint at ``path``.

        Args:
            spec: the registered agent, or None when there is none.
            path: the request path (``/{id}/mcp`` or ``/agents/{id}/mcp``): the resource URL is
                ``base + path`` and its metadata is path-inserted (RFC 9728 §3.1).
            headers: the request's (lower-case name, value) pairs, repeats included.
            a2a: admit for an A2A binding (``path`` is then the agent's MCP path, the resource):
                ``a2a_enabled`` is checked instead of ``mcp_enabled``.

        Raises:
            AuthenticationError, InsufficientScopeError: with ``WWW-Authenticate`` set in ``headers``.
            AgentNotFoundError: unknown agent, or not the credential's user's; for ``a2a``, an agent
                with ``a2a_enabled = false``.
            McpDisabledError: the agent's MCP endpoint is off (not for ``a2a``).
        """
        if spec is not None and spec.auth == "none":
            self._check_plane(agent_id, spec, a2a=a2a)
            return ANONYMOUS
        scope = agent_scope(agent_id)
        try:
            principal = await self._resolver.resolve(headers)
            if principal is None:
                raise AuthenticationError("authentication required")
            if principal.kind is CredentialKind.OAUTH:
                resources = {agent_resource(self._base, agent_id), self._base + path}
                if not resources.intersection(principal.audience or ()):
                    raise AuthenticationError(
                        "the access token was not issued for this resource", oauth_error="invalid_token"
                    )
                if scope not in principal.scopes:
                    raise InsufficientScopeError(f"the access token does not grant {scope}", scope=scope)
            elif principal.kind is CredentialKind.AGENT_KEY and agent_id not in (principal.agents or ()):
                raise InsufficientScopeError("the agent key is bound to another agent", scope=scope)
        except (AuthenticationError, InsufficientScopeError) as exc:
            raise self._challenged(exc, resource_metadata_url(self._base, path), scope) from None
        if spec is None or not principal.may_reach(agent_id, spec.owner):
            raise AgentNotFoundError(agent_id)
        self._check_plane(agent_id, spec, a2a=a2a)
        return principal

    @staticmethod
    def _check_plane(agent_id: str, spec: AgentSpec, *, a2a: bool) -> None:
        if a2a:
            if not spec.a2a_enabled:
                raise AgentNotFoundError(agent_id)
        elif not spec.mcp_enabled:
            raise McpDisabledError(f"MCP is disabled for agent {agent_id}")

    async def admit_user(self, path: str, headers: Iterable[tuple[str, str]]) -> Principal:
        """The user principal for the user-level endpoint at ``path`` (``/mcp``): OAuth or ``oag_`` only.

        Raises:
            AuthenticationError: no, or an invalid, credential; a token for another resource.
            InsufficientScopeError: an agent key (``bak_``), which is not a user credential.
        """
        try:
            principal = await self._resolver.resolve(headers)
            if principal is None:
                raise AuthenticationError("authentication required")
            if principal.kind is CredentialKind.OAUTH and user_resource(self._base) not in (principal.audience or ()):
                raise AuthenticationError(
                    "the access token was not issued for this resource", oauth_error="invalid_token"
                )
            if not principal.is_user:
                raise InsufficientScopeError(
                    "the user-level endpoint needs a user credential (OAuth or oag_)", scope=USER_SCOPE
                )
        except (AuthenticationError, InsufficientScopeError) as exc:
            raise self._challenged(exc, resource_metadata_url(self._base, path), USER_SCOPE) from None
        return principal

    async def admit_discovery(self, headers: Iterable[tuple[str, str]]) -> Principal:
        """The caller of discovery (``GET /api/v1/agents``): an ``oag_`` key, a ``bak_`` key, or an OAuth access
        token issued for the user-level endpoint ``{base}/mcp`` (its audience; a token for one agent's endpoint
        is refused). The challenge names ``/mcp``'s metadata and the ``mcp`` scope: a token got for ``/mcp``
        serves both.

        Raises:
            AuthenticationError: no, or an invalid, credential; a token for another resource.
        """
        try:
            principal = await self._resolver.resolve(headers)
            if principal is None:
                raise AuthenticationError("authentication required")
            if principal.kind is CredentialKind.OAUTH and user_resource(self._base) not in (principal.audience or ()):
                raise AuthenticationError(
                    "the access token was not issued for this resource", oauth_error="invalid_token"
                )
        except AuthenticationError as exc:
            raise self._challenged(exc, resource_metadata_url(self._base, "/mcp"), USER_SCOPE) from None
        return principal

    @staticmethod
    def _challenged(exc: GatewayError, metadata_url: str, scope: str | None) -> GatewayError:
        if isinstance(exc, InsufficientScopeError):
            exc.headers["WWW-Authenticate"] = challenge_header(
                metadata_url, error="insufficient_scope", description=exc.message, scope=exc.scope or scope
            )
        elif isinstance(exc, AuthenticationError):
            exc.headers["WWW-Authenticate"] = challenge_header(
                metadata_url, error=exc.oauth_error, description=exc.message if exc.oauth_error else None, scope=scope
            )
        return exc
