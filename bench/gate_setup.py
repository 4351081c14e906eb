"""Credentials for ``bench/run.py --gate``: the echo agent behind the credential gate.

Run by ``bench/run.py`` with the benched tree's ``src/`` first on ``PYTHONPATH`` (so the stores
and the token codec are that tree's), never imported by it:

    python bench/gate_setup.py setup DIR TREE
        DIR/echo_agent.py   a copy of TREE/examples/echo_agent.py (agents import from their file's folder)
        DIR/gate.toml       the echo agent of TREE/examples/hivegate.toml with owner = "bench" and
                            without auth = "none"; database sqlite+aiosqlite:///DIR/gate.db
        DIR/none.toml       the same agent with auth = "none"; database DIR/none.db
        DIR/gate.db         migrated; user "bench", one oag_ key, one OAuth grant (agent:echo)
        stdout              JSON: user_id, key (the plaintext), key_prefix, grant_id, client_id, database urls

    python bench/gate_setup.py token ISSUER SIGNING_KEY USER_ID GRANT_ID CLIENT_ID
        stdout              an access token for ISSUER/echo/mcp, scope agent:echo, as the server's
                            authorization server would mint it (HS256, SIGNING_KEY, 24 h)
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import shutil
import sys
import tomllib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hivegate.auth.api_keys import KeyKind, mint_key
from hivegate.auth.passwords import hash_password
from hivegate.auth.tokens import TokenCodec
from hivegate.storage.oauth import GrantRecord


async def _open_stores(url: str) -> tuple[Any, Any, Callable[[], Awaitable[None]]]:
    """The credential and OAuth stores of the benched tree, and how to close them.

    ``--baseline-tree`` may name a tree from before ``open_storage`` (issue 8): it had one factory per store.
    """
    try:
        from hivegate.storage import open_storage
    except ImportError:  # a tree from before issue 8
        from hivegate.storage.credentials import create_credential_store  # type: ignore[attr-defined]
        from hivegate.storage.oauth import create_oauth_store  # type: ignore[attr-defined]

        credentials: Any = await create_credential_store(url)
        oauth: Any = await create_oauth_store(url)

        async def close() -> None:
            await oauth.close()
            await credentials.close()

        return credentials, oauth, close
    storage = await open_storage(url)
    return storage.credentials, storage.oauth, storage.close


AGENT = "echo"
OWNER = "bench"
CLIENT_ID = "bench-client"
TOKEN_TTL_SECONDS = 86_400
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    """An inline TOML value (JSON string escapes are valid TOML basic-string escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML for {type(value).__name__}")


def write_config(path: Path, agent: dict[str, Any], database_url: str) -> None:
    """A config file with one ``[database]`` table and one ``[[agents]]`` entry, checked by reading it back."""
    lines = ["# written by bench/gate_setup.py", "", "[database]", f"url = {_toml_value(database_url)}", ""]
    lines.append("[[agents]]")
    lines += [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in agent.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    back = tomllib.loads(path.read_text(encoding="utf-8"))
    if back != {"database": {"url": database_url}, "agents": [agent]}:
        raise SystemExit(f"{path}: the written TOML does not read back as the agent")


async def setup(out: Path, tree: Path) -> dict[str, Any]:
    document = tomllib.loads((tree / "examples" / "hivegate.toml").read_text(encoding="utf-8"))
    echo = next(a for a in document["agents"] if a["id"] == AGENT)
    shutil.copy(tree / "examples" / "echo_agent.py", out / "echo_agent.py")
    gated = {k: v for k, v in echo.items() if k != "auth"} | {"owner": OWNER}
    gate_url = f"sqlite+aiosqlite:///{out / 'gate.db'}"
    none_url = f"sqlite+aiosqlite:///{out / 'none.db'}"
    write_config(out / "gate.toml", gated, gate_url)
    write_config(out / "none.toml", gated | {"auth": "none"}, none_url)

    credentials, oauth, close = await _open_stores(gate_url)
    try:
        user = await credentials.create_user(OWNER, hash_password(secrets.token_urlsafe(16)))
        key = mint_key(KeyKind.USER)
        await credentials.create_api_key(
            user_id=user.id, agent_id=None, name="bench", key_hash=key.digest, prefix=key.prefix
        )
        grant = GrantRecord(
            id=f"grt_bench{secrets.token_hex(4)}",
            user_id=user.id,
            client_id=CLIENT_ID,
            client_name="bench",
            agents=(AGENT,),
            scopes=(f"agent:{AGENT}",),
            resource=None,
            created_at=datetime.now(UTC),
        )
        await oauth.create_grant(grant)
    finally:
        await close()
    return {
        "user_id": user.id,
        "key": key.plaintext,
        "key_prefix": key.prefix,
        "grant_id": grant.id,
        "client_id": CLIENT_ID,
        "gate_database_url": gate_url,
        "none_database_url": none_url,
    }


def token(issuer: str, signing_key: str, user_id: str, grant_id: str, client_id: str) -> str:
    codec = TokenCodec(issuer, signing_key.encode(), TOKEN_TTL_SECONDS)
    minted, _ = codec.mint(
        subject=user_id,
        audience=[f"{issuer}/{AGENT}/mcp"],
        client_id=client_id,
        scopes=[f"agent:{AGENT}"],
        grant_id=grant_id,
    )
    return minted


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "setup":
        print(json.dumps(asyncio.run(setup(Path(argv[1]).resolve(), Path(argv[2]).resolve()))))
        return 0
    if len(argv) == 6 and argv[0] == "token":
        print(token(*argv[1:]))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
