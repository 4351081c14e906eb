"""``hivegate serve``: run the gateway with uvicorn.

Before listening, the database is reached and migrated (:func:`hivegate.storage.open_storage`);
when it cannot be (unreachable, no answer within ``database.connect_timeout_seconds`` /
``statement_timeout_seconds``, refusing the migration), the command prints one line naming the
database and exits with status 4 (see :mod:`hivegate.cli`). A failure later in start-up (applying
``--config``'s agents, in :meth:`hivegate.gateway.Gateway.open`) ends the same way. The storage,
the gateway and uvicorn share one event loop (:mod:`hivegate.cli.running`).
"""

from __future__ import annotations

import logging
import socket
from typing import Annotated

import anyio
import typer

from hivegate.agents.loader import AgentsFileError, load_agents_file
from hivegate.cli.options import (
    FLAG,
    ConfigOption,
    DatabaseOption,
    err_console,
    fail,
    settings_from,
)
from hivegate.settings import Settings
from hivegate.storage import open_storage

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
        for client in ("httpx", "httpx2", "httpcore", "httpcore2"):  # "HTTP Request: POST …" per upstream call
            logging.getLogger(client).setLevel(logging.WARNING)
    if reload:
        anyio.run(_check_database, settings)  # StoreUnavailableError: one line, exit status 4 (hivegate.cli)
        sock, settings = _listen(settings)
        from hivegate.cli.reload import reload_dirs, serve_reloading

        watched = reload_dirs(settings, agent_dirs)
        err_console.print(f"[yellow]--reload:[/yellow] restarting on changes in {', '.join(watched)}", highlight=False)
        print(f"hivegate listening on {_shown(sock)}", flush=True)
        raise typer.Exit(serve_reloading(settings, sock, watched))
    status = anyio.run(_serve, settings, backend_options={"use_uvloop": True})
    if status:
        raise typer.Exit(status)


async def _serve(settings: Settings) -> int:
    """Open the storage, listen, open the gateway and serve it until shut down, all in one event loop.

    The database comes first: when it cannot be opened (:class:`StoreUnavailableError`, one line and
    exit status 4 in :mod:`hivegate.cli`) nothing listens; a busy address is exit status 3.
    """
    from hivegate.cli.running import serve_gateway  # the server's imports load only for `serve`

    storage = await open_storage(settings.database.url, settings.database.limits())
    try:
        sock, settings = _listen(settings)
    except BaseException:
        await storage.close()
        raise
    sock.set_inheritable(False)  # one process serves it: no child (a stdio upstream) may hold it
    return await serve_gateway(settings, [sock], storage=storage)


def _listen(settings: Settings) -> tuple[socket.socket, Settings]:
    """The listening socket for ``settings.server``, and the settings naming the port bound (exit status 3 when
    the address cannot be bound); warns when every interface listens but the URLs name this host."""
    try:
        sock = _bind(settings.server.host, settings.server.port)
    except OSError as exc:
        raise fail(f"cannot listen on {settings.server.host}:{settings.server.port}: {exc.strerror}", 3) from None
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
    return sock, settings


def _refuse_default_secrets(settings: Settings, dev: bool) -> list[str]:
    """The secrets still at their development default; exit status 2 if there are any outside ``--dev``."""
    defaults = settings.default_secrets()
    if defaults and not dev:
        names = ", ".join(f"{name} (env HIVEGATE_{name.replace('.', '__').upper()})" for name in defaults)
        raise fail(
            f"{names} still {'has' if len(defaults) == 1 else 'have'} the development default. "
            "Set a random secret of at least "
            "32 bytes (`openssl rand -hex 32`), or pass --dev for local development.",
            2,
        )
    return defaults


def _agent_dirs(settings: Settings) -> list[str]:
    """The folders of the config file's python agents (watched by ``--reload``); exit status 2 on a bad file."""
    if settings.config_file is None:
        return []
    try:
        return [spec.base_dir for spec in load_agents_file(settings.config_file) if spec.base_dir]
    except AgentsFileError as exc:
        raise fail(str(exc), 2) from None


def _shown(sock: socket.socket) -> str:
    """``http://HOST:PORT`` of a listening socket (an IPv6 address in brackets)."""
    address = sock.getsockname()
    host = f"[{address[0]}]" if ":" in address[0] else address[0]
    return f"http://{host}:{address[1]}"


async def _check_database(settings: Settings) -> None:
    """Open (and migrate) the database and close it again, before listening (``--reload``: each worker opens it).

    Raises:
        StoreUnavailableError: it is unreachable, does not answer in time, or refuses the migration.
    """
    storage = await open_storage(settings.database.url, settings.database.limits())
    await storage.close()


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
