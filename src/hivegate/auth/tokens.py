"""OAuth access tokens: HS256 JWTs minted and checked with PyJWT.

Shape (RFC 9068 profile): header ``{"alg": "HS256", "typ": "at+jwt"}``; claims ``iss`` (the
issuer, byte-identical to the metadata's), ``sub`` (user id), ``aud`` (a list of resource URLs:
the granted agents' endpoint URLs, plus the user-level endpoint when asked for),
``client_id``, ``scope`` (space-separated ``agent:{id}``), ``iat``, ``exp``, ``jti``, and
``gid`` (the grant it belongs to, so revoking the grant revokes the token).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass

import jwt

__all__ = ["AccessTokenClaims", "InvalidAccessToken", "TokenCodec"]

_ALGORITHM = "HS256"
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
"""RFC 7515 §7.1 compact serialization with unpadded base64url parts (RFC 7515 §2)."""
_REQUIRED = ["iss", "sub", "aud", "exp", "iat", "jti", "client_id", "scope", "gid"]


class InvalidAccessToken(ValueError):
    """The string is not a valid access token of this issuer (bad signature, expired, malformed, wrong issuer)."""


@dataclass(frozen=True, slots=True)
class AccessTokenClaims:
    """A verified token's claims. ``expires_at`` and ``issued_at`` are Unix seconds."""

    subject: str
    audience: tuple[str, ...]
    client_id: str
    scopes: tuple[str, ...]
    grant_id: str
    jti: str
    issued_at: int
    expires_at: int


class TokenCodec:
    """Mint and verify access tokens for one issuer with one HS256 key (≥ 32 bytes)."""

    def __init__(self, issuer: str, key: bytes, ttl_seconds: int) -> None:
        self.issuer = issuer
        self._key = key
        self.ttl_seconds = ttl_seconds

    def mint(
        self, *, subject: str, audience: Sequence[str], client_id: str, scopes: Sequence[str], grant_id: str
    ) -> tuple[str, AccessTokenClaims]:
        """A fresh signed token and its claims; ``exp`` = now + ``ttl_seconds``."""
        now = int(time.time())
        claims = AccessTokenClaims(
            subject=subject,
            audience=tuple(audience),
            client_id=client_id,
            scopes=tuple(scopes),
            grant_id=grant_id,
            jti=secrets.token_urlsafe(16),
            issued_at=now,
            expires_at=now + self.ttl_seconds,
        )
        payload = {
            "iss": self.issuer,
            "sub": claims.subject,
            "aud": list(claims.audience),
            "client_id": claims.client_id,
            "scope": " ".join(claims.scopes),
            "iat": claims.issued_at,
            "exp": claims.expires_at,
            "jti": claims.jti,
            "gid": claims.grant_id,
        }
        token = jwt.encode(payload, self._key, algorithm=_ALGORITHM, headers={"typ": "at+jwt"})
        return token, claims

    def verify(self, token: str) -> AccessTokenClaims:
        """Check signature (HS256 only), issuer, expiry and the required claims.

        The audience is returned, not checked: the caller compares it with its own resource URL
        (RFC 8707 §2, RFC 9068 §4).

        Raises:
            InvalidAccessToken: with a reason safe to show the client.
        """
        if _COMPACT_JWS.fullmatch(token) is None:  # one spelling per token: no padding, no other characters
            raise InvalidAccessToken("the access token is invalid")
        try:
            header = jwt.get_unverified_header(token)
            if header.get("typ") not in ("at+jwt", "application/at+jwt"):
                raise InvalidAccessToken("not an access token")
            payload = jwt.decode(
                token,
                self._key,
                algorithms=[_ALGORITHM],
                issuer=self.issuer,
                options={"require": _REQUIRED, "verify_aud": False},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidAccessToken("the access token has expired") from None
        except jwt.InvalidIssuerError:
            raise InvalidAccessToken("the access token was issued by another issuer") from None
        except jwt.PyJWTError:
            raise InvalidAccessToken("the access token is invalid") from None
        aud = payload["aud"]
        audience = (aud,) if isinstance(aud, str) else tuple(aud) if isinstance(aud, list) else ()
        scope = payload["scope"]
        if (
            not audience
            or not all(isinstance(item, str) for item in audience)
            or not isinstance(scope, str)
            or not all(isinstance(payload[name], str) for name in ("sub", "client_id", "jti", "gid"))
        ):
            raise InvalidAccessToken("the access token is invalid")
        return AccessTokenClaims(
            subject=payload["sub"],
            audience=audience,
            client_id=payload["client_id"],
            scopes=tuple(scope.split()),
            grant_id=payload["gid"],
            jti=payload["jti"],
            issued_at=int(payload["iat"]),
            expires_at=int(payload["exp"]),
        )
