"""Pagination through a real server: an agent with ``page_size = 1`` walked with the official client.

Spec: MCP 2026-07-28 server/utilities/pagination (opaque ``cursor`` / ``nextCursor``; an
invalid cursor SHOULD be -32602).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from tests.gateway_process import GatewayProcess, run_gateway

MODES = ["2026-07-28", "legacy"]
WALK_TIMEOUT_SECONDS = 30
RESOURCE_URIS = ["hivegate://agent/config", "hivegate://agent/skills", "page://one", "page://two", "page://three"]
PROMPT_NAMES = ["first", "second", "third", "fourth"]
TEMPLATES = ["tpl://a/{x}", "tpl://b/{x}", "tpl://c/{x}"]


def _agent_toml(agent_id: str) -> str:
    resources = "".join(
        f'[[agents.resources]]\nuri = "{uri}"\nname = "{uri[7:]}"\ntext = "{uri}"\n\n' for uri in RESOURCE_URIS[2:]
    )
    prompts = "".join(
        f'[[agents.prompts]]\nname = "{name}"\nmessages = [{{ text = "{name}" }}]\n\n' for name in PROMPT_NAMES
    )
    templates = "".join(
        f'[[agents.resource_templates]]\nuri_template = "{t}"\nname = "t{i}"\ntext = "{{x}}"\n\n'
        for i, t in enumerate(TEMPLATES)
    )
    header = f'[[agents]]\nid = "{agent_id}"\nname = "Paged"\nowner = "alice"\nauth = "none"\npage_size = 1\n\n'
    return header + resources + prompts + templates


@pytest.fixture(scope="module")
def paged_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    config: Path = tmp_path_factory.mktemp("paged") / "hivegate.toml"
    config.write_text(_agent_toml("paged") + "\n" + _agent_toml("twin"), encoding="utf-8")
    with run_gateway(config) as gateway:
        yield gateway


async def _walk(fetch: Callable[[str | None], Awaitable[tuple[list[str], str | None]]]) -> list[list[str]]:
    """Every page, following ``nextCursor`` until it is absent (bounded)."""
    pages: list[list[str]] = []
    cursor: str | None = None
    with anyio.fail_after(WALK_TIMEOUT_SECONDS):
        for _ in range(20):
            items, cursor = await fetch(cursor)
            pages.append(items)
            if not cursor:
                return pages
    raise AssertionError(f"pagination did not end: {pages}")


@pytest.mark.parametrize("mode", MODES)
async def test_every_list_walks_one_item_per_page_in_order(paged_gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{paged_gateway.url}/paged/mcp", mode=mode) as client:

        async def resources(cursor: str | None) -> tuple[list[str], str | None]:
            page = await client.list_resources(cursor=cursor)
            return [r.uri for r in page.resources], page.next_cursor

        async def prompts(cursor: str | None) -> tuple[list[str], str | None]:
            page = await client.list_prompts(cursor=cursor)
            return [p.name for p in page.prompts], page.next_cursor

        async def templates(cursor: str | None) -> tuple[list[str], str | None]:
            page = await client.list_resource_templates(cursor=cursor)
            return [t.uri_template for t in page.resource_templates], page.next_cursor

        for fetch, expected in ((resources, RESOURCE_URIS), (prompts, PROMPT_NAMES), (templates, TEMPLATES)):
            pages = await _walk(fetch)
            assert pages == [[item] for item in expected]

        tools = await client.list_tools()  # no backend: no tools, one empty page
        assert (tools.tools, tools.next_cursor) == ([], None)


@pytest.mark.parametrize("mode", MODES)
async def test_empty_cursor_is_the_first_page(paged_gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{paged_gateway.url}/paged/mcp", mode=mode) as client:
        page = await client.list_resources(cursor="", cache_mode="bypass")
        assert [r.uri for r in page.resources] == RESOURCE_URIS[:1]
        assert page.next_cursor


@pytest.mark.parametrize("mode", MODES)
async def test_a_cursor_only_works_on_its_own_list(paged_gateway: GatewayProcess, mode: str) -> None:
    async with Client(f"{paged_gateway.url}/paged/mcp", mode=mode) as client:
        first = await client.list_resources()
        cursor = first.next_cursor
        assert cursor is not None
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: client.list_prompts(cursor=cursor),
            lambda: client.list_resource_templates(cursor=cursor),
            lambda: client.list_tools(cursor=cursor),
            lambda: client.list_resources(cursor=cursor + "x"),
            lambda: client.list_resources(cursor="not-a-cursor"),
        ]
        for call in calls:
            with pytest.raises(MCPError) as refused:
                await call()
            assert refused.value.code == -32602
    async with Client(f"{paged_gateway.url}/twin/mcp", mode=mode) as twin:
        with pytest.raises(MCPError) as refused:
            await twin.list_resources(cursor=cursor)
        assert refused.value.code == -32602
