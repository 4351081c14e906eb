"""API keys: mint users' ``oag_`` and agents' ``bak_`` keys, recognise a presented key, and digest it for storage.

A key is its prefix and 64 lowercase hex digits (32 random bytes from :mod:`secrets`).
Only the SHA-256 hex digest of the whole key is stored, with its first
:data:`DISPLAY_PREFIX_LENGTH` characters for display; the plaintext is shown once, at
creation. Anything that does not look exactly like a key (other prefix, other length,
non-hex, upper case) is not a key, and callers treat it as some other credential.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "AGENT_KEY_PREFIX",
    "DISPLAY_PREFIX_LENGTH",
    "KEY_HEX_LENGTH",
    "KEY_LENGTH",
    "USER_KEY_PREFIX",
    "KeyKind",
    "MintedKey",
    "PresentedKey",
    "display_prefix",
    "find_digest",
    "key_digest",
    "mint_key",
    "parse_api_key",
]

USER_KEY_PREFIX = "oag_"
"""A user key: reaches every MCP-enabled agent its user owns."""

AGENT_KEY_PREFIX = "bak_"
"""An agent key: bound to one agent."""

KEY_HEX_LENGTH = 64
"""Hex digits after the prefix (32 random bytes)."""

KEY_LENGTH = len(USER_KEY_PREFIX) + KEY_HEX_LENGTH
"""Characters in a whole key (68); both prefixes have four."""

DISPLAY_PREFIX_LENGTH = 12
"""Characters of a key kept for display: the prefix and 8 hex digits (``oag_1a2b3c4d``)."""

_KEY_PATTERN = re.compile(rf"(oag_|bak_)[0-9a-f]{{{KEY_HEX_LENGTH}}}")


class KeyKind(StrEnum):
    """Whose key it is; the value is the key's prefix."""

    USER = USER_KEY_PREFIX
    AGENT = AGENT_KEY_PREFIX


@dataclass(frozen=True, slots=True)
class MintedKey:
    """A new key: ``plaintext`` (show once, never store), ``digest`` and ``prefix`` (store these)."""

    kind: KeyKind
    plaintext: str
    digest: str
    prefix: str

    def __repr__(self) -> str:  # keep the plaintext out of logs and tracebacks
        return f"MintedKey(kind={self.kind!r}, prefix={self.prefix!r})"


@dataclass(frozen=True, slots=True)
class PresentedKey:
    """A string recognised as a key: its kind and SHA-256 hex ``digest`` (the plaintext is not kept)."""

    kind: KeyKind
    digest: str
    prefix: str


def mint_key(kind: KeyKind) -> MintedKey:
    """A fresh random key of ``kind``: prefix + 64 lowercase hex digits."""
    plaintext = kind.value + secrets.token_hex(KEY_HEX_LENGTH // 2)
    return MintedKey(kind=kind, plaintext=plaintext, digest=key_digest(plaintext), prefix=display_prefix(plaintext))


def parse_api_key(presented: str) -> PresentedKey | None:
    """Recognise ``presented`` as a key, or None when it is not exactly ``oag_``/``bak_`` + 64 lowercase hex.

    Recognising says nothing about validity: look the ``digest`` up in the credential store.
    """
    if len(presented) != KEY_LENGTH or _KEY_PATTERN.fullmatch(presented) is None:
        return None
    return PresentedKey(kind=KeyKind(presented[:4]), digest=key_digest(presented), prefix=display_prefix(presented))


def key_digest(key: str) -> str:
    """The SHA-256 hex digest (64 lowercase hex) of the whole key, as stored."""
    return hashlib.sha256(key.encode()).hexdigest()


def display_prefix(key: str) -> str:
    """The first :data:`DISPLAY_PREFIX_LENGTH` characters of ``key``, safe to show and store."""
    return key[:DISPLAY_PREFIX_LENGTH]


def find_digest(digest: str, candidates: Iterable[str]) -> str | None:
    """The candidate equal to ``digest``, comparing every candidate in constant time (no early exit).

    For stores that scan their digests (the in-memory store); a SQL store looks the
    digest up through its unique index instead.
    """
    found: str | None = None
    for candidate in candidates:
        if hmac.compare_digest(candidate.encode(), digest.encode()):
            found = candidate
    return found
