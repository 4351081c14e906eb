"""OAuth persistence: the ``OAuthStore`` protocol for clients, pending authorization requests, codes, grants
and refresh tokens, with its records.

Implementations: :class:`hivegate.storage.memory.oauth.MemoryOAuthStore` and
:class:`hivegate.storage.sql.oauth.SqlOAuthStore` (in the same database as the agent registry,
migration ``0003_oauth``); this module imports neither. One contract suite
(``tests/storage/test_oauth_store_contract.py``) runs over both.

Secrets are never stored in plaintext: authorization codes and refresh tokens are kept by
their SHA-256 hex digest (:func:`hivegate.auth.api_keys.key_digest` works for any string).
Everything that must be single-use across replicas is one transaction in the SQL store, decided
by one conditional statement: redeeming a code creates its grant (and first refresh token) in the
same transaction, rotating a refresh token stores its successor in the same transaction. A crash
at any point leaves either the old state or the new one, never a spent code or token without what
it was exchanged for. Pending authorization requests are stored only once a user has signed in
(before that they travel signed, :mod:`hivegate.auth.oauth.pending`).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime
from typing import Any, Protocol

__all__ = [
    "AuthorizationCodeRecord",
    "AuthorizationRequestRecord",
    "GrantRecord",
    "OAuthClientRecord",
    "OAuthStore",
    "RefreshTokenRecord",
    "require_aware",
]


@dataclass(frozen=True, slots=True)
class OAuthClientRecord:
    """A dynamically registered client (RFC 7591).

    ``metadata`` is the full client information as JSON (``OAuthClientInformationFull``
    dumped with ``mode="json", exclude_none=True``), including its ``client_secret`` when it
    has one. Clients identified by a metadata document URL (CIMD) are not stored here.
    """

    client_id: str
    metadata: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class AuthorizationRequestRecord:
    """An ``/oauth/authorize`` request waiting for the user to consent (stored once they signed in).

    Attributes:
        id: random, URL-safe (≥ 128 bits); carried by the consent page.
        user_id: the user who signed in (None only for requests not yet signed in for, which
            hivegate does not store).
        browser_binding: SHA-256 hex of the random cookie set on the browser that signed in
            (the consent page must come from the same browser).
        scopes: the scopes the client asked for (may be empty).
        resource: the RFC 8707 resource the client asked for, if any.
        expires_at: aware UTC.
    """

    id: str
    client_id: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    state: str | None
    scopes: tuple[str, ...]
    code_challenge: str
    resource: str | None
    created_at: datetime
    expires_at: datetime
    user_id: str | None = None
    browser_binding: str | None = None


@dataclass(frozen=True, slots=True)
class AuthorizationCodeRecord:
    """An issued authorization code (single use), by its SHA-256 hex ``code_hash``.

    ``agents`` are the agents the user granted; ``scopes`` are ``agent:{id}`` for each. Once
    redeemed, ``redeemed_at`` and ``grant_id`` (the grant it produced) are set, together; the row
    stays until it expires so that a replay can revoke that grant (RFC 6749 §4.1.2).
    """

    code_hash: str
    client_id: str
    user_id: str
    redirect_uri: str
    redirect_uri_provided_explicitly: bool
    code_challenge: str
    scopes: tuple[str, ...]
    agents: tuple[str, ...]
    resource: str | None
    expires_at: datetime
    redeemed_at: datetime | None = None
    grant_id: str | None = None


@dataclass(frozen=True, slots=True)
class GrantRecord:
    """What a user granted one client at consent: one grant per redeemed authorization code.

    A grant is a refresh-token family: every access and refresh token minted from it carries
    its id, and revoking the grant (``hivegate grants revoke``, ``/oauth/revoke``, or reuse of a
    rotated refresh token) makes all of them invalid.
    """

    id: str
    user_id: str
    client_id: str
    client_name: str | None
    agents: tuple[str, ...]
    scopes: tuple[str, ...]
    resource: str | None
    created_at: datetime
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class RefreshTokenRecord:
    """A refresh token by its SHA-256 hex ``token_hash``.

    ``rotated_at`` is set when it was exchanged for its successor, or when its grant was revoked.
    """

    token_hash: str
    grant_id: str
    client_id: str
    user_id: str
    scopes: tuple[str, ...]
    resource: str | None
    created_at: datetime
    expires_at: datetime
    rotated_at: datetime | None = None


class OAuthStore(Protocol):
    """Clients, pending authorization requests, codes, grants and refresh tokens.

    All datetimes are aware UTC; implementations raise ``ValueError`` for naive ones.
    """

    async def save_client(self, client: OAuthClientRecord) -> None:
        """Store a newly registered client (ids are unique; a duplicate id raises ``ValueError``)."""
        ...

    async def get_client(self, client_id: str) -> OAuthClientRecord | None:
        """The registered client with this id, or None."""
        ...

    async def save_request(self, request: AuthorizationRequestRecord) -> None:
        """Store a pending authorization request."""
        ...

    async def get_request(self, request_id: str, now: datetime) -> AuthorizationRequestRecord | None:
        """The pending request, or None when unknown or expired at ``now``."""
        ...

    async def take_request(self, request_id: str) -> AuthorizationRequestRecord | None:
        """Remove the request and return it (once: a second call returns None)."""
        ...

    async def save_code(self, code: AuthorizationCodeRecord) -> None:
        """Store an issued code."""
        ...

    async def get_code(self, code_hash: str) -> AuthorizationCodeRecord | None:
        """The code with this digest, redeemed or not (until purged), or None."""
        ...

    async def redeem_code(
        self, code_hash: str, grant: GrantRecord, refresh_token: RefreshTokenRecord | None, at: datetime
    ) -> bool:
        """Redeem the code for ``grant`` (and its first ``refresh_token``), in one transaction.

        Of any number of concurrent calls for one code exactly one returns True: it marks the code
        redeemed at ``at`` by ``grant.id`` and stores the grant and the token. Every other call
        (the code was redeemed already, or is unknown) returns False and stores nothing; when the
        code had been redeemed, the grant it produced is revoked at ``at`` with its refresh
        tokens, as :meth:`revoke_grant` does. Spec: RFC 6749 §4.1.2 ("If an authorization code is
        used more than once, the authorization server MUST deny the request and SHOULD revoke
        (when possible) all tokens previously issued based on that authorization code").

        Raises:
            ValueError: a naive ``at``, or a grant id or token digest that exists already.
        """
        ...

    async def create_grant(self, grant: GrantRecord) -> None:
        """Store a new grant."""
        ...

    async def get_grant(self, grant_id: str) -> GrantRecord | None:
        """The grant with this id, revoked or not, or None."""
        ...

    async def list_grants(self, user_id: str | None = None) -> builtins.list[GrantRecord]:
        """All grants (of ``user_id`` when given), revoked included, ordered by creation then id."""
        ...

    async def revoke_grant(self, grant_id: str, at: datetime) -> GrantRecord | None:
        """Revoke a grant and every refresh token in it; a grant revoked before keeps its first
        ``revoked_at``. None for an unknown id."""
        ...

    async def save_refresh_token(self, token: RefreshTokenRecord) -> None:
        """Store an issued refresh token."""
        ...

    async def get_refresh_token(self, token_hash: str) -> RefreshTokenRecord | None:
        """The refresh token with this digest, rotated or not, or None."""
        ...

    async def rotate_refresh_token(self, token_hash: str, successor: RefreshTokenRecord, at: datetime) -> bool:
        """Exchange the token for ``successor``, in one transaction: mark it rotated at ``at`` and store
        ``successor``.

        True for exactly one of any number of concurrent callers; False (nothing written) when the
        token was rotated already (a retry or a reuse: the caller decides) or is unknown.
        Spec: OAuth 2.1 §4.3.1 (refresh token rotation), RFC 9700 §4.14.2.

        Raises:
            ValueError: a naive datetime, or a successor digest that exists already.
        """
        ...

    async def purge_expired(self, now: datetime) -> int:
        """Delete expired requests, codes (redeemed or not) and refresh tokens; the number of rows removed."""
        ...

    async def ping(self) -> None:
        """Raise if the store cannot be reached."""
        ...


def require_aware(*values: object) -> None:
    """Check that every datetime among ``values``, and among the fields of the records in ``values``, is aware.

    None and other values are allowed. Both stores apply this rule to what they are given.

    Raises:
        ValueError: for a naive datetime.
    """
    for value in values:
        if is_dataclass(value) and not isinstance(value, type):
            require_aware(*(getattr(value, field.name) for field in fields(value)))
        elif isinstance(value, datetime) and value.tzinfo is None:
            raise ValueError("the OAuth store needs aware datetimes")
