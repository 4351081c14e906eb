"""Loading agent specs from a TOML agents file (``[[agents]]`` tables).

Spec: the TOML shape is documented in :mod:`hivegate.agents.model` and ``docs/configuration.md``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hivegate.agents.model import AgentSpec

__all__ = ["AgentsFileError", "load_agents_file", "parse_agents"]


class AgentsFileError(ValueError):
    """The agents file is unreadable or invalid; the message names the agent and field."""


def parse_agents(document: dict[str, Any], *, base_dir: Path) -> list[AgentSpec]:
    """Validate the ``agents`` array of a parsed TOML document.

    Returns the specs in file order, each with ``base_dir`` set to the absolute ``base_dir``.

    Raises:
        AgentsFileError: ``agents`` is not an array of tables, an entry is invalid, or ids repeat.
    """
    raw = document.get("agents", [])
    if not isinstance(raw, list):
        raise AgentsFileError("'agents' must be an array of tables ([[agents]])")
    specs: list[AgentSpec] = []
    seen: set[str] = set()
    for index, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise AgentsFileError(f"agents[{index}] must be a table")
        label = f"agents[{index}]" + (f" (id {entry.get('id')!r})" if "id" in entry else "")
        try:
            spec = AgentSpec.model_validate({**entry, "base_dir": str(base_dir.resolve())})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(agent)'}: {err['msg']}" for err in exc.errors()
            )
            raise AgentsFileError(f"{label}: {problems}") from None
        if spec.id in seen:
            raise AgentsFileError(f"{label}: duplicate agent id {spec.id!r}")
        seen.add(spec.id)
        specs.append(spec)
    return specs


def load_agents_file(path: Path | str) -> list[AgentSpec]:
    """Read and validate the agents declared in the TOML file at ``path``.

    Raises:
        AgentsFileError: the file is missing, is not valid TOML, or declares an invalid agent.
    """
    file = Path(path)
    try:
        document = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AgentsFileError(f"agents file not found: {file}") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise AgentsFileError(f"cannot read agents file {file}: {exc}") from None
    return parse_agents(document, base_dir=file.parent)
