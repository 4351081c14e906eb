"""Credential persistence: the ``CredentialStore`` protocol for users and API keys, its records and errors.

Implementations: :class:`hivegate.storage.memory.credentials.MemoryCredentialStore` and
:class:`hivegate.storage.sql.credentials.SqlCredentialStore` (in the same database as the agent
registry); this module imports neither. One contract suite
(``tests/storage/test_credential_store_contract.py``) runs over both.

Keys are stored by the SHA-256 digest of the whole key (see
:mod:`hivegate.auth.api_keys`); passwords by their argon2 hash
(:mod:`hivegate.auth.passwords`). Stores never see a plaintext.
"""

from __future__ import annotations

import builtins
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

__all__ = [
    "MAX_ACTIVE_AGENT_KEYS",
    "USERNAME_PATTERN",
    "ApiKey",
    "CredentialStore",
    "KeyLimitError",
    "UnknownUserError",
    "User",
    "UsernameTakenError",
    "new_id",
    "validate_username",
]

MAX_ACTIVE_AGENT_KEYS = 3
"""Active (unrevoked) ``bak_`` keys one agent may have."""

USERNAME_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""A username: 1–64 of ASCII letters, digits, ``_``, ``.`` and ``-``; unique ignoring case."""


class UsernameTakenError(ValueError):
    """A user with this username (compared ignoring case) already exists."""


class KeyLimitError(ValueError):
    """The agent already has :data:`MAX_ACTIVE_AGENT_KEYS` active keys; revoke one first."""


class UnknownUserError(LookupError):
    """A key was created for a user id that does not exist."""


@dataclass(frozen=True, slots=True)
class User:
    """A local account. ``password_hash`` is an encoded argon2 hash; ``created_at`` is aware UTC."""

    id: str
    username: str
    password_hash: str
    disabled: bool
    created_at: datetime

    def __repr__(self) -> str:  # keep the hash out of logs
        return f"User(id={self.id!r}, username={self.username!r}, disabled={self.disabled!r})"


@dataclass(frozen=True, slots=True)
class ApiKey:
    """A stored API key, without its secret.

    Attributes:
        prefix: the key's first 12 characters (``oag_`` or ``bak_`` + 8 hex), for display.
        agent_id: the agent a ``bak_`` key is bound to; None for a user's ``oag_`` key.
        created_at, last_used_at, revoked_at: aware UTC; the last two None until set.
    """

    id: str
    prefix: str
    user_id: str
    agent_id: str | None
    name: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


def validate_username(username: str) -> str:
    """``username`` unchanged when it matches :data:`USERNAME_PATTERN`.

    Raises:
        ValueError: naming the rule it breaks.
    """
    if USERNAME_PATTERN.fullmatch(username) is None:
        raise ValueError(f"invalid username {username!r}: use 1-64 of A-Z a-z 0-9 _ . -")
    return username


def new_id(kind: str) -> str:
    """A fresh random id such as ``usr_3f9a1c0b5e7d2a64`` (``kind`` + ``_`` + 16 hex)."""
    return f"{kind}_{secrets.token_hex(8)}"


def require_key_shape(agent_id: str | None, prefix: str) -> None:
    """Check that a ``bak_`` prefix comes with an agent id and an ``oag_`` one without.

    Raises:
        ValueError: when they disagree.
    """
    expected = "oag_" if agent_id is None else "bak_"
    if not prefix.startswith(expected):
        raise ValueError(f"a key {'without' if agent_id is None else 'with'} an agent must start with {expected}")


class CredentialStore(Protocol):
    """Users and API keys.

    Usernames are unique ignoring case and looked up ignoring case; the spelling given
    at creation is kept. Keys are never deleted, only revoked, so a revoked key still
    resolves (with ``revoked_at`` set) and callers can tell "revoked" from "unknown".
    """

    async def create_user(self, username: str, password_hash: str) -> User:
        """Create an enabled user.

        Raises:
            ValueError: for a username breaking :data:`USERNAME_PATTERN`.
            UsernameTakenError: when the username exists, in any case.
        """
        ...

    async def get_user(self, user_id: str) -> User | None:
        """The user with this id, or None."""
        ...

    async def get_user_by_username(self, username: str) -> User | None:
        """The user with this username (ignoring case), or None."""
        ...

    async def list_users(self) -> builtins.list[User]:
        """All users, ordered by username ignoring case."""
        ...

    async def set_user_disabled(self, username: str, disabled: bool) -> User | None:
        """Disable (or re-enable) a user; the updated user, or None when there is none."""
        ...

    async def set_password_hash(self, username: str, password_hash: str) -> User | None:
        """Replace a user's password hash; the updated user, or None when there is none."""
        ...

    async def create_api_key(
        self, *, user_id: str, agent_id: str | None, name: str, key_hash: str, prefix: str
    ) -> ApiKey:
        """Store a new key by its SHA-256 hex ``key_hash``.

        Args:
            user_id: the owner (for a ``bak_`` key, the agent's owner who made it).
            agent_id: the agent a ``bak_`` key is bound to; None for an ``oag_`` key.
            name: a label for people, may be empty.
            key_hash: :func:`hivegate.auth.api_keys.key_digest` of the key; unique.
            prefix: :func:`hivegate.auth.api_keys.display_prefix` of the key.

        Raises:
            KeyLimitError: when ``agent_id`` already has :data:`MAX_ACTIVE_AGENT_KEYS` active keys.
            UnknownUserError: when ``user_id`` does not exist.
            ValueError: when the prefix's kind disagrees with ``agent_id``.
        """
        ...

    async def get_api_key_by_hash(self, key_hash: str) -> ApiKey | None:
        """The key with this digest, revoked or not, or None."""
        ...

    async def list_api_keys(self, user_id: str | None = None) -> builtins.list[ApiKey]:
        """All keys (of ``user_id`` when given), revoked ones included, ordered by creation then id."""
        ...

    async def revoke_api_key(self, key_id: str) -> ApiKey | None:
        """Revoke a key now; a key revoked before keeps its first ``revoked_at``. None for an unknown id."""
        ...

    async def touch_api_key(self, key_id: str, at: datetime) -> None:
        """Record a use at ``at`` (aware); an unknown id is ignored.

        Raises:
            ValueError: for a naive ``at``.
        """
        ...

    async def ping(self) -> None:
        """Raise if the store cannot be reached."""
        ...
