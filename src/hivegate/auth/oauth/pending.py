"""Pending authorization requests carried signed, so ``/oauth/authorize`` stores nothing.

``/oauth/authorize`` is anonymous. Storing each request it accepts let anyone write a database
row per call (issue 7 item 4: 233 rows/s, +30 MB in 25 s). Instead the validated request is
sealed into a compact JWS (PyJWT, HS256) and carried in the sign-in page's URL and form; it is
stored only once a user has signed in (:meth:`AuthorizationServer` ``_login_submit``), bound to
that user and browser.

Shape: header ``{"alg": "HS256", "typ": "hivegate-authz-request+jwt"}``; claims ``jti`` (the
request id, 256 random bits), ``iat``, ``exp`` (Unix seconds; ``exp - iat`` =
``security.authorization_request_ttl_seconds``), ``client_id``, ``redirect_uri``, ``rdx``
(redirect URI given explicitly), ``state``, ``scope`` (a list), ``code_challenge``,
``resource``. The key is derived from ``security.token_signing_key`` with HMAC-SHA256 over a
fixed label, so a sealed request is never a valid access token (nor the reverse).

A sealed request holds only what its sender put in the ``/oauth/authorize`` query, after this
server validated it (client, registered redirect URI, S256 challenge, resource); the signature
vouches for that validation. It is not secret and not single-use: replaying it only shows the
sign-in page again, as repeating the ``/oauth/authorize`` call would. Its size is bounded by
the authorize checks (``state`` ≤ 2,048 characters; client ids and redirect URIs as registered).

Spec: RFC 6749 §4.1.1 (the request), RFC 7515 (JWS compact serialization).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt

from hivegate.storage.oauth import AuthorizationRequestRecord

__all__ = ["MAX_SEALED_LENGTH", "PendingRequests"]

_TYPE = "hivegate-authz-request+jwt"
_LABEL = b"hivegate oauth pending authorization request v1"
_REQUIRED = ["jti", "iat", "exp", "client_id", "redirect_uri", "rdx", "scope", "code_challenge"]
MAX_SEALED_LENGTH = 16 * 1024
"""Longest sealed request: ``/oauth/authorize`` refuses a request that would seal longer, and longer
strings are refused before any parsing (a quarter of the HTTP server's default header budget)."""
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")


class PendingRequests:
    """Seal and open pending authorization requests.

    Args:
        signing_key: ``security.token_signing_key`` (≥ 32 bytes); a separate key is derived from it.
        ttl_seconds: how long a sealed request stays valid (``security.authorization_request_ttl_seconds``).
    """

    def __init__(self, signing_key: bytes, ttl_seconds: int) -> None:
        self._key = hmac.new(signing_key, _LABEL, hashlib.sha256).digest()
        self._ttl = timedelta(seconds=ttl_seconds)

    def seal(
        self,
        *,
        client_id: str,
        redirect_uri: str,
        redirect_uri_provided_explicitly: bool,
        state: str | None,
        scopes: tuple[str, ...],
        code_challenge: str,
        resource: str | None,
        now: datetime,
    ) -> str:
        """A sealed request (URL-safe, no padding) valid from ``now`` (aware UTC) for the TTL."""
        issued = int(now.timestamp())
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(32),
            "iat": issued,
            "exp": issued + int(self._ttl.total_seconds()),
            "client_id": client_id,
            "redirect_uri": redirect_uri,
            "rdx": redirect_uri_provided_explicitly,
            "state": state,
            "scope": list(scopes),
            "code_challenge": code_challenge,
            "resource": resource,
        }
        return jwt.encode(claims, self._key, algorithm="HS256", headers={"typ": _TYPE})

    def open(self, sealed: str, now: datetime) -> AuthorizationRequestRecord | None:
        """The request ``sealed`` carries, or None when it is malformed, forged, or expired at ``now``.

        The record's ``id`` is the ``jti``; ``user_id`` and ``browser_binding`` are None.
        """
        if len(sealed) > MAX_SEALED_LENGTH or _COMPACT_JWS.fullmatch(sealed) is None:
            return None
        try:
            if jwt.get_unverified_header(sealed).get("typ") != _TYPE:
                return None
            claims = jwt.decode(
                sealed,
                self._key,
                algorithms=["HS256"],
                options={"require": _REQUIRED, "verify_exp": False, "verify_iat": False},
            )
        except jwt.PyJWTError:
            return None
        return _record(claims, now)


def _record(claims: dict[str, Any], now: datetime) -> AuthorizationRequestRecord | None:
    """The record from verified ``claims`` (signed by us, so well-typed unless the format changed), if not expired."""
    issued, expires = claims["iat"], claims["exp"]
    if not isinstance(issued, int) or not isinstance(expires, int) or now.timestamp() >= expires:
        return None
    scopes = claims["scope"]
    if not isinstance(scopes, list) or not all(isinstance(scope, str) for scope in scopes):
        return None
    return AuthorizationRequestRecord(
        id=str(claims["jti"]),
        client_id=str(claims["client_id"]),
        redirect_uri=str(claims["redirect_uri"]),
        redirect_uri_provided_explicitly=bool(claims["rdx"]),
        state=claims.get("state") if isinstance(claims.get("state"), str) else None,
        scopes=tuple(scopes),
        code_challenge=str(claims["code_challenge"]),
        resource=claims.get("resource") if isinstance(claims.get("resource"), str) else None,
        created_at=datetime.fromtimestamp(issued, UTC),
        expires_at=datetime.fromtimestamp(expires, UTC),
    )
