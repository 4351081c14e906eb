"""``hivegate serve --reload``: for development, restart the server whenever a watched file changes.

Built on uvicorn's reloader (``watchfiles``): the parent process holds the listening socket and
watches the folders; each change starts a fresh worker process, which imports hivegate and the
agents' modules anew, so edits to an agent's Python code (or to the config file) take effect
without stopping the command. Requests in flight during a restart are cut off, and sessions and
listen streams end: never use it in production.
"""

from __future__ import annotations

import functools
import logging
import socket
from collections.abc import Sequence
from pathlib import Path

import anyio
import uvicorn
from uvicorn.supervisors import ChangeReload

from hivegate.cli.running import serve_gateway
from hivegate.errors import StoreUnavailableError
from hivegate.settings import Settings

__all__ = ["reload_dirs", "run_worker", "serve_reloading"]

logger = logging.getLogger(__name__)


def reload_dirs(settings: Settings, agent_dirs: Sequence[str]) -> list[str]:
    """The folders to watch: the config file's, the agents' ``base_dir`` (their modules), else the working one."""
    folders = [str(settings.config_file.parent)] if settings.config_file is not None else []
    folders += agent_dirs
    return list(dict.fromkeys(folders)) or [str(Path.cwd())]


def serve_reloading(settings: Settings, sock: socket.socket, watch: Sequence[str]) -> int:
    """Serve on ``sock`` in a worker process, restarted on every change of a ``*.py`` or ``*.toml`` file
    under ``watch``; returns when interrupted (status 0)."""
    config = uvicorn.Config(
        "hivegate.app:create_app",  # uvicorn sets up watching only for an import string (never imported here)
        factory=True,
        reload=True,
        reload_dirs=list(watch),
        reload_includes=["*.py", "*.toml"],
        host=settings.server.host,
        port=settings.server.port,
        log_level=settings.server.log_level,
    )
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # not a line per changed file of any kind
    # Each worker opens its gateway from these settings (pickled into the spawned process), not from
    # the environment again: what `serve` validated is what every worker runs.
    ChangeReload(config, target=functools.partial(run_worker, settings), sockets=[sock]).run()
    return 0


def run_worker(settings: Settings, sockets: list[socket.socket] | None = None) -> None:
    """A reload worker: open the gateway and serve it on ``sockets`` (from the parent) until stopped.

    A database failure at start-up is logged as one line and ends this worker; the parent keeps
    watching, and the next change starts a new one.
    """
    try:
        anyio.run(
            functools.partial(serve_gateway, settings, sockets or [], announce=False),
            backend_options={"use_uvloop": True},
        )
    except StoreUnavailableError as exc:
        logger.error("%s", exc)
