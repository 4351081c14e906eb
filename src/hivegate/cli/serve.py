"""``hivegate serve``: run the gateway with uvicorn.

Before listening, the database is reached and migrated; when it cannot be (unreachable, no answer
within ``database.connect_timeout_seconds`` / ``statement_timeout_seconds``, refusing the
migration), the command prints one line naming the database and exits with status 4 (see
:mod:`hivegate.cli`). A failure later in start-up (applying ``--config``'s agents) ends the same way.
"""

from __future__ import annotations

import gc
import logging
import socket
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.cli.options import (
    DATABASE_UNAVAILABLE_EXIT,
    FLAG,
    ConfigOption,
    DatabaseOption,
    err_console,
    settings_from,
)
from hivegate.settings import Settings
from hivegate.storage.credentials import MEMORY_URL

if TYPE_CHECKING:
    import uvicorn

__all__ = ["serve"]


def serve(
    config: ConfigOption = None,
    host: Annotated[
        str | None, typer.Option("--host", metavar="HOST", help="Interface to bind (default `127.0.0.1`).")
    ] = None,
    port: Annotated[
        int | None, typer.Option("--port", metavar="PORT", help="Port to bind; `0` picks a free one (default `8094`).")
    ] = None,
    database_url: DatabaseOption = None,
    dev: Annotated[
        bool, typer.Option("--dev", metavar=FLAG, help="Development mode: allow the default secrets.")
    ] = False,
    reload: Annotated[
        bool,
        typer.Option(
            "--reload",
            metavar=FLAG,
            help="Development: restart when a `.py` or `.toml` file changes in the config's or the agents' folders.",
        ),
    ] = False,
) -> None:
    """Serve every registered agent at /{agentId}/mcp (and the agents in --config, applied at start-up)."""
    server_overrides: dict[str, object] = {}
    if host is not None:
        server_overrides["host"] = host
    if port is not None:
        server_overrides["port"] = port
    settings = settings_from(config, server=server_overrides, database={"url": database_url} if database_url else {})
    defaults = _refuse_default_secrets(settings, dev)
    agent_dirs = _agent_dirs(settings)
    if defaults:
        err_console.print("[yellow]--dev:[/yellow] development secrets in use; do not expose this server.")
    logging.basicConfig(level=settings.server.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    if settings.server.log_level != "debug":
        logging.getLogger("alembic").setLevel(logging.WARNING)  # "Context impl SQLiteImpl" once per store
    anyio.run(_check_database, settings)  # StoreUnavailableError: one line, exit status 4 (hivegate.cli)
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
    if settings.server.public_url is None and settings.server.host in ("0.0.0.0", "::", ""):
        err_console.print(
            f"[yellow]warning:[/yellow] listening on every interface, but OAuth and resource URLs name "
            f"{settings.base_url()}: set HIVEGATE_SERVER__PUBLIC_URL (and server.allowed_hosts) for other machines.",
            highlight=False,
        )
    if reload:
        from hivegate.cli.reload import reload_dirs, serve_reloading

        watched = reload_dirs(settings, agent_dirs)
        err_console.print(f"[yellow]--reload:[/yellow] restarting on changes in {', '.join(watched)}", highlight=False)
        print(f"hivegate listening on {_shown(sock)}", flush=True)
        raise typer.Exit(serve_reloading(settings, sock, watched))
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
    if app.startup_failure is not None:  # the lifespan logged it as one line
        raise typer.Exit(DATABASE_UNAVAILABLE_EXIT)
    if status:
        raise typer.Exit(status)


def _refuse_default_secrets(settings: Settings, dev: bool) -> list[str]:
    """The secrets still at their development default; exit status 2 if there are any outside ``--dev``."""
    defaults = settings.default_secrets()
    if defaults and not dev:
        names = ", ".join(f"{name} (env HIVEGATE_{name.replace('.', '__').upper()})" for name in defaults)
        err_console.print(
            f"[red]error:[/red] {names} still {'has' if len(defaults) == 1 else 'have'} the development default. "
            "Set a random secret of at least "
            "32 bytes (`openssl rand -hex 32`), or pass --dev for local development."
        )
        raise typer.Exit(2)
    return defaults


def _agent_dirs(settings: Settings) -> list[str]:
    """The folders of the config file's python agents (watched by ``--reload``); exit status 2 on a bad file."""
    if settings.config_file is None:
        return []
    try:
        return [spec.base_dir for spec in load_agents_file(settings.config_file) if spec.base_dir]
    except AgentsFileError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(2) from None


def _shown(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a listening socket (an IPv6 address in brackets)."""
    address = sock.getsockname()
    host = f"[{address[0]}]" if ":" in address[0] else address[0]
    return f"http://{host}:{address[1]}"


async def _check_database(settings: Settings) -> None:
    """Reach and migrate the database before listening (idempotent; the lifespan finds it current).

    Raises:
        StoreUnavailableError: it is unreachable, does not answer in time, or refuses the migration.
    """
    if settings.database.url != MEMORY_URL:
        from hivegate.storage.sql.migrate import upgrade

        await upgrade(settings.database.url, limits=settings.database.limits())


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
