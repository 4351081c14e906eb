"""Discovery against a real server: ``GET /api/v1/agents`` and ``/mcp``'s ``discover_agents`` tool.

Users alice, bob and carol; private and public agents of each; one public agent with
``a2a_enabled = false`` (never listed). Each caller sees exactly :func:`_expected` (its own agents,
or those its credential reaches, plus every public one), through every filter and page; bob never
sees alice's private agents, whatever the filter or cursor; cursors are bound to their caller and
query; hostile query values are 4xx, never 5xx. Users, keys and grants are written by the stores;
tokens are minted with the server's signing key (as ``test_auth_matrix.py``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import TextContent

from hivegate.auth.passwords import hash_password
from hivegate.auth.tokens import TokenCodec
from hivegate.storage import open_storage
from hivegate.storage.oauth import GrantRecord
from tests.e2e.registry_seed import add_key
from tests.gateway_process import ROOT, GatewayProcess, run_gateway

SIGNING_KEY = "discovery-signing-key-0123456789abcdef01234567"
TIMEOUT_SECONDS = 30
MODES = ["legacy", "2026-07-28"]


@dataclass(frozen=True)
class Agent:
    id: str
    owner: str
    visibility: str
    name: str
    description: str = ""
    skills: tuple[tuple[str, tuple[str, ...]], ...] = ()
    a2a: bool = True

    def toml(self) -> str:
        lines = [
            "[[agents]]",
            f'id = "{self.id}"',
            f'name = "{self.name}"',
            f'description = "{self.description}"',
            f'owner = "{self.owner}"',
            f'visibility = "{self.visibility}"',
            f"a2a_enabled = {'true' if self.a2a else 'false'}",
            'backend = { type = "python", callable = "echo_agent:reply" }',
        ]
        for skill_id, tags in self.skills:
            quoted = ", ".join(f'"{t}"' for t in tags)
            lines += ["[[agents.skills]]", f'id = "{skill_id}"', f'name = "{skill_id}"', f"tags = [{quoted}]"]
        return "\n".join(lines) + "\n"

    def tags(self) -> set[str]:
        # An agent without skills gets one for its message tool, tagged with its id (docs/a2a.md).
        return {t for _, tags in self.skills for t in tags} if self.skills else {self.id}

    def skill_ids(self) -> set[str]:
        return {s for s, _ in self.skills} if self.skills else {self.id}


AGENTS = (
    Agent("alice-diary", "alice", "private", "Alice's Diary", "Private notes of Alice.", (("write", ("text",)),)),
    Agent("alice-shop", "alice", "public", "Alice's Shop", "Sells things.", (("sell", ("commerce", "text")),)),
    Agent("alice-vault", "alice", "private", "Vault", "Secret SECRETS.", (("secret", ("commerce",)),)),
    Agent("alice-dark", "alice", "public", "Dark", "Public but no A2A.", a2a=False),
    Agent("bob-notes", "bob", "private", "Bob's Notes", "Bob writes.", (("write", ("text",)),)),
    Agent("bob-weather", "bob", "public", "Weather", "Forecasts for Bob and all.", (("forecast", ("weather",)),)),
    *(Agent(f"carol-pub-{n}", "carol", "public", f"Carol {n}", "Translates text.") for n in range(5)),
    Agent("carol-private", "carol", "private", "Carol's secret", "Not for you."),
)
BY_ID = {a.id: a for a in AGENTS}


def _expected(
    viewer: str,
    reach: set[str] | None = None,
    *,
    tag: str | None = None,
    skill: str | None = None,
    q: str | None = None,
) -> list[str]:
    """The ids ``viewer`` may see (``reach``: the credential's agents, None for all the user's), filtered."""
    ids: list[str] = []
    for agent in sorted(AGENTS, key=lambda a: a.id):
        mine = agent.owner == viewer and (reach is None or agent.id in reach)
        if not agent.a2a or not (agent.visibility == "public" or mine):
            continue
        if tag is not None and tag not in agent.tags():
            continue
        if skill is not None and skill not in agent.skill_ids():
            continue
        if q is not None and q.casefold() not in f"{agent.name}\n{agent.description or agent.name}".casefold():
            continue
        ids.append(agent.id)
    return ids


@dataclass(frozen=True)
class World:
    gateway: GatewayProcess
    alice: str
    bob: str
    alice_bak: str
    """A ``bak_`` key bound to alice-vault."""
    oauth_user: str
    """alice's token for ``/mcp``, granting alice-diary only."""
    oauth_agent: str
    """alice's token for alice-diary's endpoint only (not for ``/mcp``)."""

    @property
    def url(self) -> str:
        return f"{self.gateway.url}/api/v1/agents"


async def _seed(database_url: str, base: str) -> dict[str, str]:
    storage = await open_storage(database_url)
    credentials = storage.credentials
    try:
        users = {name: await credentials.create_user(name, hash_password(f"{name} pw")) for name in ("alice", "bob")}

        record = GrantRecord(
            id="grt_diary",
            user_id=users["alice"].id,
            client_id="discovery-client",
            client_name="Discovery",
            agents=("alice-diary",),
            scopes=("agent:alice-diary",),
            resource=None,
            created_at=datetime.now(UTC),
        )
        await storage.oauth.create_grant(record)
        codec = TokenCodec(base, SIGNING_KEY.encode(), 3600)

        def token(audience: list[str]) -> str:
            minted, _ = codec.mint(
                subject=record.user_id,
                audience=audience,
                client_id=record.client_id,
                scopes=record.scopes,
                grant_id=record.id,
            )
            return minted

        return {
            "alice": await add_key(credentials, users["alice"].id),
            "bob": await add_key(credentials, users["bob"].id),
            "alice_bak": await add_key(credentials, users["alice"].id, "alice-vault"),
            "oauth_user": token([f"{base}/mcp"]),
            "oauth_agent": token([f"{base}/alice-diary/mcp"]),
        }
    finally:
        await storage.close()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("discovery")
    config = folder / "agents.toml"
    config.write_text("".join(a.toml() for a in AGENTS), encoding="utf-8")
    database_url = f"sqlite+aiosqlite:///{folder / 'hivegate.db'}"
    env = {
        "PYTHONPATH": str(ROOT / "examples"),
        "HIVEGATE_SECURITY__TOKEN_SIGNING_KEY": SIGNING_KEY,
        "HIVEGATE_SECURITY__CREDENTIAL_CACHE_SECONDS": "0",
    }
    with run_gateway(config, database_url=database_url, env=env) as gateway:
        keys = anyio.run(_seed, database_url, gateway.url)
        yield World(gateway, **keys)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _get(world: World, headers: dict[str, str], **params: Any) -> httpx.Response:
    return httpx.get(world.url, params=params, headers=headers, timeout=TIMEOUT_SECONDS)


def _all_ids(world: World, headers: dict[str, str], **params: Any) -> list[str]:
    """Every page's card names → agent ids, following ``nextCursor`` (bounded)."""
    ids: list[str] = []
    cursor: str | None = None
    for _ in range(len(AGENTS) + 2):
        response = _get(world, headers, **params, **({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.text
        body = response.json()
        ids += [_card_id(card) for card in body["agents"]]
        cursor = body.get("nextCursor")
        if cursor is None:
            return ids
    raise AssertionError("pagination did not end")


def _card_id(card: dict[str, Any]) -> str:
    """The agent id of a card: its JSON-RPC URL is ``{base}/{id}/a2a``."""
    url: str = card["supportedInterfaces"][0]["url"]
    return url.rsplit("/", 2)[-2]


# -- what each caller sees -----------------------------------------------------------------------

FILTERS: list[dict[str, str]] = [
    {},
    {"tag": "text"},
    {"tag": "commerce"},
    {"skill": "write"},
    {"skill": "secret"},
    {"q": "secret"},
    {"q": "ALICE"},
    {"q": "translates", "tag": "carol-pub-3"},
    {"tag": "alice-dark"},
    {"tag": "nothing"},
]


@pytest.mark.parametrize("limit", [1, 2, 20])
@pytest.mark.parametrize("filters", FILTERS, ids=lambda f: "&".join(f"{k}={v}" for k, v in f.items()) or "all")
def test_each_user_sees_exactly_what_they_may(world: World, filters: dict[str, str], limit: int) -> None:
    for viewer, key in (("alice", world.alice), ("bob", world.bob)):
        ids = _all_ids(world, _bearer(key), limit=limit, **filters)
        assert ids == _expected(viewer, **filters), viewer  # type: ignore[arg-type]
        if viewer == "bob":
            assert not {i for i in ids if BY_ID[i].owner == "alice" and BY_ID[i].visibility == "private"}
        assert "alice-dark" not in ids
        assert "carol-private" not in ids


def test_cards_are_the_card_endpoints(world: World) -> None:
    body = _get(world, _bearer(world.bob), q="weather").json()
    assert len(body["agents"]) == 1
    card = httpx.get(f"{world.gateway.url}/bob-weather/.well-known/agent-card.json", timeout=TIMEOUT_SECONDS)
    assert body["agents"][0] == card.json()


def test_agent_key_sees_its_agent_and_public_ones(world: World) -> None:
    ids = _all_ids(world, {"X-Agent-API-Key": world.alice_bak}, limit=3)
    assert ids == _expected("alice", {"alice-vault"})
    assert "alice-diary" not in ids


def test_oauth_token_for_mcp_sees_its_grant(world: World) -> None:
    assert _all_ids(world, _bearer(world.oauth_user)) == _expected("alice", {"alice-diary"})


def test_oauth_token_for_an_agent_is_401(world: World) -> None:
    response = _get(world, _bearer(world.oauth_agent))
    assert response.status_code == 401
    assert 'error="invalid_token"' in response.headers["www-authenticate"]


def test_no_credential_is_401_with_a_challenge(world: World) -> None:
    response = _get(world, {})
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert f'resource_metadata="{world.gateway.url}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert response.json()["error"]["details"][0]["metadata"]["code"] == "unauthorized"
    bogus = _get(world, _bearer("oag_" + "0" * 64))
    assert bogus.status_code == 401


def test_visible_does_not_mean_callable(world: World) -> None:
    """bob lists alice-shop (public) but its endpoints stay alice's."""
    assert "alice-shop" in _all_ids(world, _bearer(world.bob))
    response = httpx.post(
        f"{world.gateway.url}/alice-shop/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={**_bearer(world.bob), "Accept": "application/json, text/event-stream"},
        timeout=TIMEOUT_SECONDS,
    )
    assert response.status_code == 404


def test_method_other_than_get_is_405(world: World) -> None:
    response = httpx.post(world.url, headers=_bearer(world.alice), timeout=TIMEOUT_SECONDS)
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"


# -- cursors -------------------------------------------------------------------------------------


def _error_code(response: httpx.Response) -> str:
    code: str = response.json()["error"]["details"][0]["metadata"]["code"]
    return code


def test_alices_cursor_is_refused_for_bob(world: World) -> None:
    first = _get(world, _bearer(world.alice), limit=1).json()
    cursor = first["nextCursor"]
    assert _get(world, _bearer(world.alice), limit=1, cursor=cursor).status_code == 200
    refused = _get(world, _bearer(world.bob), limit=1, cursor=cursor)
    assert refused.status_code == 400
    assert _error_code(refused) == "invalid_cursor"
    # The same cursor with another query is refused too.
    assert _get(world, _bearer(world.alice), limit=1, cursor=cursor, tag="text").status_code == 400


def _flip_last(cursor: str) -> str:
    return cursor[:-1] + ("A" if cursor[-1] != "A" else "B")


def _forge_offset(cursor: str) -> str:
    return "MTAw" + cursor[4:]  # "100" as the payload, the old tag


def _extend(cursor: str) -> str:
    return cursor + "x"


def _garbage(cursor: str) -> str:
    return "not a cursor"


def _nul(cursor: str) -> str:
    return "%00"


@pytest.mark.parametrize("mangle", [_flip_last, _forge_offset, _extend, _garbage, _nul])
def test_tampered_cursor_is_400(world: World, mangle: Callable[[str], str]) -> None:
    cursor = _get(world, _bearer(world.alice), limit=1).json()["nextCursor"]
    response = _get(world, _bearer(world.alice), limit=1, cursor=mangle(cursor))
    assert response.status_code == 400
    assert _error_code(response) == "invalid_cursor"


@pytest.mark.parametrize("limit", ["0", "101", "-1", "1.5", "x", "99999", "١"])
def test_bad_limit_is_400(world: World, limit: str) -> None:
    response = _get(world, _bearer(world.alice), limit=limit)
    assert response.status_code == 400
    assert _error_code(response) == "invalid_params"


_query_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=300)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    params=st.dictionaries(st.sampled_from(["tag", "skill", "q", "cursor", "limit", "other"]), _query_text, max_size=5)
)
def test_hostile_query_values_never_500(world: World, params: dict[str, str]) -> None:
    response = _get(world, _bearer(world.bob), **params)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 200:
        ids = [_card_id(card) for card in response.json()["agents"]]
        assert set(ids) <= set(_expected("bob"))


# -- the discover_agents tool on /mcp ------------------------------------------------------------


@asynccontextmanager
async def _client(world: World, key: str, mode: str) -> AsyncGenerator[Client]:
    async with (
        httpx2.AsyncClient(headers=_bearer(key), timeout=TIMEOUT_SECONDS) as http,
        Client(streamable_http_client(f"{world.gateway.url}/mcp", http_client=http), mode=mode) as client,  # type: ignore[arg-type]
    ):
        yield client


@pytest.mark.parametrize("mode", MODES)
async def test_discover_agents_tool(world: World, mode: str) -> None:
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with _client(world, world.bob, mode) as client:
            tools = await client.list_tools()
            assert tools.tools[0].name == "discover_agents"
            ids: list[str] = []
            arguments: dict[str, Any] = {"tag": "text", "limit": 1}
            for _ in range(len(AGENTS) + 2):
                result = await client.call_tool("discover_agents", arguments)
                assert not result.is_error
                structured = result.structured_content
                assert structured is not None
                ids += [_card_id(card) for card in structured["agents"]]
                assert isinstance(result.content[0], TextContent)
                assert "agent" in result.content[0].text
                cursor = structured.get("nextCursor")
                if cursor is None:
                    break
                arguments = {"tag": "text", "limit": 1, "cursor": cursor}
            assert ids == _expected("bob", tag="text")
            assert "alice-diary" not in ids

            alices = await _alice_cursor(world, mode)
            with pytest.raises(MCPError) as refused:
                await client.call_tool("discover_agents", {"tag": "text", "limit": 1, "cursor": alices})
            assert refused.value.code == -32602


async def _alice_cursor(world: World, mode: str) -> str:
    async with _client(world, world.alice, mode) as client:
        result = await client.call_tool("discover_agents", {"tag": "text", "limit": 1})
        structured = result.structured_content
        assert structured is not None
        ids = [_card_id(card) for card in structured["agents"]]
        assert ids == _expected("alice", tag="text")[:1]
        cursor = structured["nextCursor"]
        assert isinstance(cursor, str)
        return cursor


@pytest.mark.parametrize("mode", MODES)
async def test_discover_agents_rest_and_tool_agree(world: World, mode: str) -> None:
    with anyio.fail_after(TIMEOUT_SECONDS):
        async with _client(world, world.alice, mode) as client:
            result = await client.call_tool("discover_agents", {"q": "alice"})
            assert result.structured_content == _get(world, _bearer(world.alice), q="alice").json()


# -- a private agent's card ----------------------------------------------------------------------


def _card(world: World, agent_id: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.get(f"{world.gateway.url}/{agent_id}/.well-known/agent-card.json", headers=headers, timeout=30)


def test_a_private_agents_card_is_its_owners_only(world: World) -> None:
    unknown = _card(world, "nobody-here", {})
    assert unknown.status_code == 404
    for headers in ({}, _bearer(world.bob), _bearer("oag_" + "0" * 64), _bearer(world.oauth_agent)):
        refused = _card(world, "alice-vault", headers)
        assert refused.status_code == 404, headers
        assert refused.json()["error"]["details"] == unknown.json()["error"]["details"]
        assert "www-authenticate" not in refused.headers
    for headers in (_bearer(world.alice), {"X-Agent-API-Key": world.alice_bak}):
        served = _card(world, "alice-vault", headers)
        assert served.status_code == 200
        assert served.headers["cache-control"] == "private, max-age=300"
        assert "Authorization" in served.headers["vary"]
        assert served.json()["name"] == "Vault"
    # A public agent's card is served to anyone, for caches to share.
    public = _card(world, "alice-shop", {})
    assert public.status_code == 200
    assert public.headers["cache-control"] == "public, max-age=300"
    assert _card(world, "bob-weather", _bearer(world.alice)).status_code == 200
