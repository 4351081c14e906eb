"""The ``hivegate`` command line: ``serve``, ``agents``, ``users``, ``keys`` and ``grants``.

Every command that cannot use its database (unreachable, not answering within the
``database.*_timeout_seconds`` limits, refusing the migration or a write) prints one line on
stderr naming the database (without its password) and the cause, and exits with status
:data:`DATABASE_UNAVAILABLE_EXIT` (4); no traceback.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from hivegate.cli.agents import agents_app
from hivegate.cli.grants import grants_app
from hivegate.cli.keys import keys_app
from hivegate.cli.options import DATABASE_UNAVAILABLE_EXIT, FLAG, MARKUP_MODE, Command, Group, err_console
from hivegate.cli.serve import serve
from hivegate.cli.users import users_app
from hivegate.errors import StoreUnavailableError

__all__ = ["DATABASE_UNAVAILABLE_EXIT", "app", "main"]


class _Commands(Group):
    """The root command group: a database failure in any command is one line and exit status 4."""

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click.Context (private module)
        try:
            return super().invoke(ctx)
        except StoreUnavailableError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", soft_wrap=True, highlight=False)
            raise typer.Exit(DATABASE_UNAVAILABLE_EXIT) from None


app = typer.Typer(
    name="hivegate",
    help="hivegate: agents as MCP servers (both protocol eras) behind one self-hostable gateway.",
    no_args_is_help=True,
    add_completion=False,
    cls=_Commands,
    rich_markup_mode=MARKUP_MODE,
)


def _print_version(value: bool) -> None:
    if value:
        from hivegate import __version__

        typer.echo(f"hivegate {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, metavar=FLAG, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """hivegate: agents as MCP servers (both protocol eras) behind one self-hostable gateway."""


app.command(cls=Command)(serve)
app.add_typer(agents_app, name="agents")
app.add_typer(users_app, name="users")
app.add_typer(keys_app, name="keys")
app.add_typer(grants_app, name="grants")


def main() -> None:
    """Console-script entry point."""
    app()
