"""Seed a gateway's registry in process: users with passwords, and ``oag_`` / ``bak_`` keys.

For tests that write to the registry directly (through :func:`hivegate.storage.open_storage`)
rather than through the CLI (:mod:`tests.e2e.registry_cli`).
"""

from __future__ import annotations

from collections.abc import Mapping

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.auth.passwords import hash_password
from hivegate.storage import open_storage
from hivegate.storage.credentials import CredentialStore

__all__ = ["add_key", "create_users"]


async def create_users(database_url: str, passwords: Mapping[str, str]) -> None:
    """Open the registry at ``database_url`` and create each user of ``passwords`` (username → password)."""
    storage = await open_storage(database_url)
    try:
        for username, password in passwords.items():
            await storage.credentials.create_user(username, hash_password(password))
    finally:
        await storage.close()


async def add_key(credentials: CredentialStore, user_id: str, agent_id: str | None = None) -> str:
    """Mint and store a key of ``user_id`` (unnamed): ``oag_`` without ``agent_id``, else ``bak_`` bound to it.

    Returns:
        The key's plaintext, the one time it exists.
    """
    minted = mint_key(KeyKind.USER if agent_id is None else KeyKind.AGENT)
    await credentials.create_api_key(
        user_id=user_id, agent_id=agent_id, name="", key_hash=minted.digest, prefix=minted.prefix
    )
    return minted.plaintext
