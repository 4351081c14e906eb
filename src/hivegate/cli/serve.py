"""``hivegate serve``: run the gateway with uvicorn."""

from __future__ import annotations

import gc
import logging
import socket
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.cli.options import ConfigOption, DatabaseOption, err_console, settings_from

if TYPE_CHECKING:
    import uvicorn

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
    defaults = settings.default_secrets()
    if defaults and not dev:
        names = ", ".join(f"{name} (env HIVEGATE_{name.replace('.', '__').upper()})" for name in defaults)
        err_console.print(
            f"[red]error:[/red] {names} still {'has' if len(defaults) == 1 else 'have'} the development default. "
            "Set a random secret of at least "
            "32 bytes (`openssl rand -hex 32`), or pass --dev for local development."
        )
        raise typer.Exit(2)
    if settings.config_file is not None:
        try:
            load_agents_file(settings.config_file)
        except AgentsFileError as exc:
            err_console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(2) from None
    if defaults:
        err_console.print("[yellow]--dev:[/yellow] development secrets in use; do not expose this server.")
    logging.basicConfig(level=settings.server.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if settings.server.log_level != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl" once per store
    try:
        sock = _bind(settings.server.host, settings.server.port)
    except OSError as exc:
        err_console.print(
            f"[red]error:[/red] cannot listen on {settings.server.host}:{settings.server.port}: {exc.strerror}"
        )
        raise typer.Exit(3) from None
    if settings.server.public_url is None:
        # The issuer and resource URLs must name the port actually bound (port 0 picks one).
        settings = settings.model_copy(
            update={"server": settings.server.model_copy(update={"port": sock.getsockname()[1]})}
        )
    import uvicorn  # the server's imports load only for `serve`, not for the other commands

    from hivegate.app import create_app
    from hivegate.http_server import http_protocol

    app = create_app(settings)
    uv_config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        loop="uvloop",
        http=http_protocol(settings.server),  # httptools with hivegate's head, field and connection limits
        ws="none",  # hivegate serves no WebSocket endpoint
        timeout_keep_alive=settings.server.keep_alive_timeout_seconds,
        log_level=settings.server.log_level,
        access_log=False,
        proxy_headers=False,
        lifespan="on",
    )
    status = anyio.run(_run, uvicorn.Server(uv_config), sock, backend_options={"use_uvloop": True})
    if status:
        raise typer.Exit(status)


def _bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` has a colon), as uvicorn would bind it.

    Raises:
        OSError: the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError:
        sock.close()
        raise
    return sock


async def _run(server: uvicorn.Server, sock: socket.socket) -> int:
    """Serve until shut down; returns uvicorn's exit status (3 when it could not start, e.g. a busy port)."""
    status = 0

    async def serve() -> None:
        nonlocal status
        try:
            await server.serve(sockets=[sock])
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
