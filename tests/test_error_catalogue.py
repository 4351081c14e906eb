"""docs/errors.md against the one table of codes (the classes of ``hivegate.errors``), both ways.

Every class that declares a ``code`` (in any module) has a row with its class, parent, HTTP status,
JSON-RPC code and OAuth ``error``; every row names such a class; no module builds a body with a
``code`` or OAuth ``error`` outside the table; the OAuth table lists exactly ``OAUTH_ERRORS``, each
value sent by hivegate or by the SDK's OAuth handlers.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import mcp.server.auth.handlers
import pytest

import hivegate
from hivegate.errors import OAUTH_ERRORS, GatewayError, catalogue

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "errors.md"
SRC = ROOT / "src" / "hivegate"

_CODE_ATTRIBUTE = re.compile(r'^\s+code = "([a-z_]+)"', re.MULTILINE)
_CODE_MEMBER = re.compile(r'"code":\s*"([a-z_]+)"')
_OAUTH_VALUES = (
    re.compile(r'"error":\s*"([a-z_]+)"'),
    re.compile(r'(?:TokenError|AuthorizeError|RegistrationError|oauth_error)\(\s*"([a-z_]+)"'),
    re.compile(r'\berror="([a-z_]+)"'),
    re.compile(r'oauth_error="([a-z_]+)"'),
)


def _import_all() -> None:
    """Import every module of hivegate, so that every subclass of the tree is defined (Alembic's
    migration scripts and ``__main__`` run on import, and define no errors)."""
    for module in pkgutil.walk_packages(hivegate.__path__, "hivegate."):
        if ".migrations" not in module.name and not module.name.endswith("__main__"):
            importlib.import_module(module.name)


def _table(heading: str) -> list[list[str]]:
    """The cells (backticks stripped) of the first table after ``heading`` in docs/errors.md."""
    lines = DOC.read_text(encoding="utf-8").splitlines()
    start = lines.index(heading)
    rows: list[list[str]] = []
    for line in lines[start + 1 :]:
        if line.startswith("|"):
            rows.append([cell.strip().replace("`", "") for cell in line.strip("|").split("|")])
        elif rows:
            break
    return rows[2:]  # header and rule


def _parent(error: type[GatewayError]) -> str:
    coded = [base for base in error.__mro__[1:] if "code" in vars(base)]
    return coded[0].__name__ if coded else "—"


def _row(error: type[GatewayError]) -> list[str]:
    return [
        error.code,
        error.__name__,
        _parent(error),
        str(error.http_status),
        str(error.jsonrpc_code),
        error.oauth_code,
    ]


def _sources() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(SRC.rglob("*.py"))}


@pytest.fixture(scope="module")
def tree() -> list[type[GatewayError]]:
    _import_all()
    return catalogue()


def test_every_class_with_a_code_has_its_row(tree: list[type[GatewayError]]) -> None:
    documented = {row[0]: row[:6] for row in _table("## Codes")}
    for error in tree:
        assert documented.get(error.code) == _row(error), f"docs/errors.md row for {error.__name__}: {_row(error)}"


def test_every_row_is_a_class_of_the_tree(tree: list[type[GatewayError]]) -> None:
    rows = [row[0] for row in _table("## Codes")]
    assert len(rows) == len(set(rows)), "a code is documented twice"
    assert sorted(rows) == sorted(error.code for error in tree)


def test_codes_are_unique(tree: list[type[GatewayError]]) -> None:
    codes = [error.code for error in tree]
    assert len(codes) == len(set(codes))
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes)


def test_no_module_sends_a_code_outside_the_table(tree: list[type[GatewayError]]) -> None:
    codes = {error.code for error in tree}
    for path, text in _sources().items():
        for pattern in (_CODE_ATTRIBUTE, _CODE_MEMBER):
            for code in pattern.findall(text):
                assert code in codes, f"{path.relative_to(ROOT)} sends code {code!r}, not in errors.py's table"


def _oauth_values_sent() -> set[str]:
    return {value for text in _sources().values() for pattern in _OAUTH_VALUES for value in pattern.findall(text)}


def test_every_oauth_error_sent_is_in_the_table(tree: list[type[GatewayError]]) -> None:
    sent = _oauth_values_sent() | {error.oauth_code for error in tree}
    assert sent <= set(OAUTH_ERRORS), sent - set(OAUTH_ERRORS)


def test_every_oauth_error_of_the_table_is_sent(tree: list[type[GatewayError]]) -> None:
    sdk = "".join(path.read_text(encoding="utf-8") for path in Path(mcp.server.auth.handlers.__path__[0]).glob("*.py"))
    hivegate_sends = _oauth_values_sent() | {error.oauth_code for error in tree}
    for value in OAUTH_ERRORS:
        assert value in hivegate_sends or f'"{value}"' in sdk, f"{value} is listed but nothing sends it"


def test_the_oauth_table_lists_the_oauth_errors() -> None:
    rows = {row[0]: row[1] for row in _table("## OAuth `error` values")}
    assert rows == OAUTH_ERRORS
