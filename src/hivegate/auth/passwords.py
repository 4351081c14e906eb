"""Password hashing for local user accounts, with argon2id (argon2-cffi's ``PasswordHasher``).

The encoded hash carries its own salt and parameters, so it is the only thing stored;
:func:`password_needs_rehash` tells a caller, after a successful login, that the hash
was made with older parameters and should be replaced.
"""

from __future__ import annotations

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

__all__ = ["hash_password", "password_needs_rehash", "verify_password"]

_DEFAULT_HASHER = PasswordHasher()
"""argon2id with argon2-cffi's RFC 9106 "low memory" defaults; immutable, so sharing it is safe."""


def hash_password(password: str, *, hasher: PasswordHasher = _DEFAULT_HASHER) -> str:
    """The encoded argon2id hash of ``password`` (``$argon2id$v=19$m=…,t=…,p=…$salt$hash``), freshly salted.

    Args:
        password: the plaintext; any string, including the empty one (callers decide policy).
        hasher: the parameters to use (tests pass cheap ones).
    """
    return hasher.hash(password)


def verify_password(password_hash: str, password: str, *, hasher: PasswordHasher = _DEFAULT_HASHER) -> bool:
    """Whether ``password`` matches ``password_hash``; False also for a malformed or foreign hash (never raises)."""
    try:
        return hasher.verify(password_hash, password)
    except (VerificationError, InvalidHashError):
        return False


def password_needs_rehash(password_hash: str, *, hasher: PasswordHasher = _DEFAULT_HASHER) -> bool:
    """Whether ``password_hash`` was made with other parameters than ``hasher``'s (so re-hash after a login).

    Raises:
        argon2.exceptions.InvalidHashError: when ``password_hash`` is not an argon2 hash.
    """
    return hasher.check_needs_rehash(password_hash)
