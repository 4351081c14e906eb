"""``hivegate serve``: run the gateway with uvicorn."""

from __future__ import annotations

import gc
import logging
from typing import Annotated

import anyio
import typer
import uvicorn

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.app import create_app
from hivegate.cli.options import ConfigOption, DatabaseOption, err_console, settings_from

__all__ = ["serve"]


def serve(
    config: ConfigOption = None,
    host: Annotated[str | None, typer.Option(help="Interface to bind (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="Port to bind; 0 picks a free one (default 8094).")] = None,
    database_url: DatabaseOption = None,
    dev: Annotated[bool, typer.Option("--dev", help="Development mode: allow the default secrets.")] = False,
) -> None:
    """Serve every registered agent at /{agentId}/mcp (and the agents in --config, applied at start-up)."""
    server_overrides: dict[str, object] = {}
    if host is not None:
        server_overrides["host"] = host
    if port is not None:
        server_overrides["port"] = port
    settings = settings_from(config, server=server_overrides, database={"url": database_url} if database_url else {})
    if settings.uses_default_secret() and not dev:
        err_console.print(
            "[yellow]warning:[/yellow] security.cursor_key has the development default; "
            "set HIVEGATE_SECURITY__CURSOR_KEY for anything but local use."
        )
    if settings.config_file is not None:
        try:
            load_agents_file(settings.config_file)
        except AgentsFileError as exc:
            err_console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
    logging.basicConfig(level=settings.server.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uv_config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        loop="uvloop",
        http="httptools",
        log_level=settings.server.log_level,
        access_log=False,
        proxy_headers=False,
        lifespan="on",
    )
    status = anyio.run(_run, uvicorn.Server(uv_config), backend_options={"use_uvloop": True})
    if status:
        raise typer.Exit(status)


async def _run(server: uvicorn.Server) -> int:
    """Serve until shut down; returns uvicorn's exit status (3 when it could not start, e.g. a busy port)."""
    status = 0

    async def serve() -> None:
        nonlocal status
        try:
            await server.serve()
        except SystemExit as exc:  # uvicorn exits when it cannot bind; it has logged why
            status = exc.code if isinstance(exc.code, int) else 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(serve)
        while not server.started:
            if server.should_exit or status:
                return status
            await anyio.sleep(0.05)
        # Objects built at start-up live for the whole process: move them out of the collector's
        # sight so full collections stay short (the SDK's p99 tail is full-GC pauses).
        gc.freeze()
        for srv in server.servers:
            for sock in srv.sockets:
                address = sock.getsockname()
                shown = f"[{address[0]}]" if ":" in address[0] else address[0]
                print(f"hivegate listening on http://{shown}:{address[1]}", flush=True)
    return status
