"""OAuth clients as hivegate's authorization server sees them: scopes it knows, redirect URIs as written, names.

:class:`GatewayClient` is the SDK's :class:`~mcp.shared.auth.OAuthClientInformationFull` with hivegate's
scope rule (``agent:{id}`` and ``mcp``; other scopes left out, RFC 6749 §3.3) and redirect matching
(:func:`~hivegate.auth.oauth.redirects.redirect_uri_matches`: exact, loopback on any port, RFC 8252 §7.3).
:func:`client_name_problem` says when a ``client_name`` cannot be shown on the sign-in and consent pages.
"""

from __future__ import annotations

import re

from mcp.shared.auth import InvalidRedirectUriError, OAuthClientInformationFull
from pydantic import AnyUrl

from hivegate.auth.oauth.redirects import redirect_uri_matches
from hivegate.auth.principal import USER_SCOPE

__all__ = [
    "MAX_CLIENT_NAME_LENGTH",
    "GatewayClient",
    "client_name_problem",
    "client_redirect_matches",
    "is_known_scope",
]

_AGENT_SCOPE = re.compile(r"agent:[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class GatewayClient(OAuthClientInformationFull):
    """A client as the SDK handlers see it; scopes are hivegate's, whatever the client registered."""

    def validate_scope(self, requested_scope: str | None) -> list[str] | None:
        """The requested scopes hivegate knows; the others are left out instead of failing the request.

        Known: ``agent:{id}`` (any syntactically valid id, existing or not, so existence does not
        leak) and :data:`~hivegate.auth.principal.USER_SCOPE` (the user-level endpoint). They only
        pre-select agents at consent: the user picks what is granted, and the token response's
        ``scope`` says what was (RFC 6749 §3.3: the server "MAY fully or partially ignore the scope
        requested"). So a client asking for ``openid email profile`` (mcp-remote's fallback) or
        ``offline_access`` still gets to the consent page.
        """
        if requested_scope is None:
            return None
        scopes: list[str] = []
        for scope in requested_scope.split():
            if scope not in scopes and is_known_scope(scope):
                scopes.append(scope)
        return scopes

    def validate_redirect_uri(self, redirect_uri: AnyUrl | None) -> AnyUrl:
        """A registered redirect URI matched by :func:`~hivegate.auth.oauth.redirects.redirect_uri_matches`.

        The authorization route has matched the request's raw ``redirect_uri`` already; this is the
        SDK handler's second look, at its parsed copy, which gains a ``/`` when the path is empty
        (``https://app.example`` → ``https://app.example/``): each registered URI is compared as
        registered and as the SDK parses it. Spec: RFC 8252 §7.3; OAuth 2.1 §4.1.3.

        Raises:
            InvalidRedirectUriError: no registered URI matches, or none is given and several are registered.
        """
        if redirect_uri is None:
            return super().validate_redirect_uri(redirect_uri)
        parsed = str(redirect_uri)
        for registered in self.redirect_uris or ():
            if redirect_uri_matches(str(registered), parsed) or redirect_uri_matches(
                str(AnyUrl(str(registered))), parsed
            ):
                return redirect_uri
        raise InvalidRedirectUriError(f"Redirect URI '{redirect_uri}' not registered for client")


def client_redirect_matches(client: OAuthClientInformationFull, requested: str) -> bool:
    """Whether ``requested`` (the ``redirect_uri`` as sent) matches one of ``client``'s registered URIs.

    Spec: RFC 6749 §3.1.2.3, RFC 8252 §7.3 (:func:`~hivegate.auth.oauth.redirects.redirect_uri_matches`).
    """
    return any(redirect_uri_matches(str(registered), requested) for registered in client.redirect_uris or ())


def is_known_scope(scope: str) -> bool:
    """``agent:{id}`` with a syntactically valid id, or the user-level endpoint's scope."""
    return scope == USER_SCOPE or _AGENT_SCOPE.fullmatch(scope) is not None


MAX_CLIENT_NAME_LENGTH = 200
"""Longest ``client_name`` accepted (it is shown on the sign-in and consent pages)."""

_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def client_name_problem(name: str | None) -> str | None:
    """Why ``client_name`` cannot be shown to users, or None when it can (or is absent).

    Control characters and bidirectional overrides could disguise the name on the consent page
    (MCP security best practices, "Confused Deputy"; RFC 7591 §5 on display names).
    """
    if name is None:
        return None
    if len(name) > MAX_CLIENT_NAME_LENGTH:
        return f"client_name is longer than {MAX_CLIENT_NAME_LENGTH} characters"
    if any(not char.isprintable() or char in _BIDI_CONTROLS for char in name):
        return "client_name contains control or bidirectional-override characters"
    return None
