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

import uvicorn
from uvicorn.supervisors import ChangeReload

from hivegate.app import create_app
from hivegate.settings import Settings

__all__ = ["reload_dirs", "serve_reloading"]


def reload_dirs(settings: Settings, agent_dirs: Sequence[str]) -> list[str]:
    """The folders to watch: the config file's, the agents' ``base_dir`` (their modules), else the working one."""
    folders = [str(settings.config_file.parent)] if settings.config_file is not None else []
    folders += agent_dirs
    return list(dict.fromkeys(folders)) or [str(Path.cwd())]


def serve_reloading(settings: Settings, sock: socket.socket, watch: Sequence[str]) -> int:
    """Serve on ``sock`` in a worker process, restarted on every change of a ``*.py`` or ``*.toml`` file
    under ``watch``; returns when interrupted (status 0)."""
    config = uvicorn.Config(
        "hivegate.app:create_app",  # uvicorn sets up watching only for an import string (replaced below)
        factory=True,
        reload=True,
        reload_dirs=list(watch),
        reload_includes=["*.py", "*.toml"],
        host=settings.server.host,
        port=settings.server.port,
        loop="uvloop",
        http="httptools",
        log_level=settings.server.log_level,
        access_log=False,
        proxy_headers=False,
        lifespan="on",
    )
    # Each worker builds the app from these settings (pickled into the spawned process), not from
    # the environment again: what `serve` validated is what every worker runs.
    config.app = functools.partial(create_app, settings)
    logging.getLogger("watchfiles").setLevel(logging.WARNING)  # not a line per changed file of any kind
    ChangeReload(config, target=uvicorn.Server(config).run, sockets=[sock]).run()
    return 0
