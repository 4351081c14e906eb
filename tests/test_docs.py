"""What the docs promise a new user: every setting documented, README snippets runnable as written (issue 7 item 17)."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from hivegate.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
README = ROOT / "README.md"


def _setting_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Dotted keys of every leaf setting (``server.port``), recursing into setting groups."""
    keys: list[str] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys += _setting_keys(annotation, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_every_setting_is_in_the_configuration_docs() -> None:
    """Issue 7 item 17: each field of Settings (recursively) appears as `group.field` in docs/configuration.md."""
    keys = _setting_keys(Settings)
    assert "server.port" in keys
    assert "security.token_signing_key" in keys
    text = CONFIGURATION.read_text(encoding="utf-8")
    missing = [key for key in keys if f"`{key}`" not in text]
    assert not missing, f"document these settings in docs/configuration.md §2: {missing}"


def _blocks(text: str, language: str) -> list[tuple[int, str]]:
    """``(start offset, body)`` of each fenced block of ``language``."""
    return [(m.start(), m.group(1)) for m in re.finditer(rf"```{language}\n(.*?)```", text, re.DOTALL)]


def test_readme_runs_python_and_hivegate_from_the_venv() -> None:
    """Issue 7 item 17: README scripts say to run with .venv/bin/python; shell lines call .venv/bin/hivegate."""
    text = README.read_text(encoding="utf-8")
    scripts = [(start, body) for start, body in _blocks(text, "python") if "anyio.run(" in body]
    assert scripts, "the README shows at least one client script"
    for start, body in scripts:
        before = text[max(0, start - 300) : start]
        assert ".venv/bin/python" in before, f"say how to run this script:\n{body[:200]}"
    for _, body in _blocks(text, "bash"):
        for line in body.splitlines():
            assert not re.match(r"\s*(python3?|hivegate|pip)\s", line), f"use the .venv/bin/ command: {line}"
