"""No import cycle anywhere in ``src/hivegate`` (issue 8 item 6), read from the modules' syntax trees.

Every ``import`` and ``from ... import`` counts, at module level or inside a function (a lazy
import still closes a cycle at run time); only imports under ``if TYPE_CHECKING:`` are left out.
``from package import name`` is an edge to ``package.name`` when that is a module, else to ``package``.
Importing a submodule runs its parent packages' ``__init__`` too, but that is no edge here: it
would make every package ``__init__`` that re-exports its submodules a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

import hivegate

PACKAGE_ROOT = Path(hivegate.__file__).parent


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(path): path for path in PACKAGE_ROOT.rglob("*.py")}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from _imports(child)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
            continue
        base = node.module or ""
        if node.level:
            anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            base = ".".join([*anchor, *([base] if base else [])])
        for alias in node.names:
            targets.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    return {target for target in targets if target in modules and target != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a list of modules (first == last), or None."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for successor in sorted(graph[node]):
            if state.get(successor) == 1:
                return [*stack[stack.index(successor) :], successor]
            if successor not in state and (found := visit(successor)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def test_the_package_has_no_import_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize(
    ("graph", "cyclic"),
    [
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, True),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, False),
        ({"a": {"a"}}, True),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], cyclic: bool) -> None:
    assert (_cycle(graph) is not None) == cyclic


def test_the_graph_sees_lazy_and_relative_imports() -> None:
    """The edges a cycle would run through are read: a function-level import, the storage protocols."""
    graph = _graph()
    assert "hivegate.storage.agents" in graph["hivegate.storage.sql.agents"]
    assert "hivegate.storage.sql.engine" in graph["hivegate.settings"]
    assert "hivegate.cli.running" in graph["hivegate.cli.serve"]  # imported inside a function
