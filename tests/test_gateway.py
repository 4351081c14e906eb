"""``Gateway.open`` then ``create_app(gateway)`` (issue 8 item 5), served in-process by a real uvicorn on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import httpx
import uvicorn
from mcp import Client

from hivegate.app import create_app
from hivegate.gateway import Gateway
from hivegate.settings import Settings
from hivegate.storage import open_storage

START_SECONDS = 20


def _listening() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    return sock


async def test_a_gateway_over_explicit_memory_storage_serves_and_its_agents_are_applied(tmp_path: Path) -> None:
    config = tmp_path / "agents.toml"
    config.write_text(
        '[[agents]]\nid = "echo"\nname = "Echo"\nowner = "alice"\nauth = "none"\n\n'
        '[[agents.prompts]]\nname = "hello"\nmessages = [{ text = "hello" }]\n',
        encoding="utf-8",
    )
    sock = _listening()
    port = sock.getsockname()[1]
    settings = Settings(config_file=config, server={"port": port})  # type: ignore[arg-type]  # validated from a dict
    storage = await open_storage("memory://")
    gateway = await Gateway.open(settings, storage=storage)
    assert gateway.storage is storage  # nothing switches silently: the stores given are the stores used
    assert [stored.spec.id for stored in await storage.agents.list()] == ["echo"]  # applied before serving
    server = uvicorn.Server(uvicorn.Config(create_app(gateway), log_level="warning", lifespan="on"))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: server.serve(sockets=[sock]))
        # The socket listens already: requests wait in its backlog until uvicorn has started (bounded by the timeout).
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=START_SECONDS) as client:
            ready = await client.get("/readyz")
            assert ready.json() == {"status": "ok", "store": "ok", "agents": 1}
        async with Client(f"http://127.0.0.1:{port}/echo/mcp", mode="2026-07-28") as mcp_client:
            assert [prompt.name for prompt in (await mcp_client.list_prompts()).prompts] == ["hello"]
        server.should_exit = True
    sock.close()
