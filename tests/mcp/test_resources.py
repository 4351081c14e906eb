"""ResourceCatalog: built-in, static and templated resources, and the file sandbox under the agent's root.

Spec: MCP 2026-07-28 server/resources; SEP-2164 (resource not found → -32602 with ``data.uri``);
RFC 6570 (``uriTemplate``).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from mcp_types import BlobResourceContents, TextResourceContents
from pydantic import ValidationError

from hivegate.agents.model import AgentSpec
from hivegate.errors import ResourceNotFoundError
from hivegate.mcp.resources import BUILTIN_URIS, ResourceCatalog

BINARY = bytes([0xFF, 0x00, 0xFE, 0x10])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``tmp_path/root`` (the agent's root) next to ``tmp_path/secret.txt`` and ``tmp_path/outside/``."""
    root = tmp_path / "root"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "guide.md").write_text("# Guide\n", encoding="utf-8")
    (root / "inside.txt").write_text("inside", encoding="utf-8")
    (root / "data.bin").write_bytes(BINARY)
    (tmp_path / "secret.txt").write_text("secret", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("secret", encoding="utf-8")
    (root / "link-out.txt").symlink_to(tmp_path / "secret.txt")
    (root / "outdir").symlink_to(tmp_path / "outside", target_is_directory=True)
    (root / "alias.txt").symlink_to(root / "inside.txt")
    return root


def _spec(**fields: Any) -> AgentSpec:
    return AgentSpec.model_validate({"id": "files", "name": "Files", "owner": "alice", **fields})


def _catalog(root: Path, **fields: Any) -> ResourceCatalog:
    return ResourceCatalog(_spec(root=str(root), **fields))


def _text(contents: list[TextResourceContents | BlobResourceContents]) -> str:
    assert len(contents) == 1
    first = contents[0]
    assert isinstance(first, TextResourceContents)
    return first.text


async def _refused(catalog: ResourceCatalog, uri: str) -> None:
    with pytest.raises(ResourceNotFoundError) as refused:
        await catalog.read(uri)
    assert refused.value.code == "resource_not_found"
    assert refused.value.data == {"uri": uri}


# -- built-ins --------------------------------------------------------------------------


async def test_builtins_are_listed_first_and_describe_the_agent() -> None:
    spec = _spec(
        page_size=7,
        skills=[{"id": "sum", "name": "Summarize", "expose_as_tool": True}],
        prompts=[{"name": "greet", "messages": [{"text": "hi"}]}],
    )
    catalog = ResourceCatalog(spec)
    assert [r.uri for r in catalog.resources] == list(BUILTIN_URIS)
    assert all(r.mime_type == "application/json" for r in catalog.resources)
    assert catalog.templates == []

    config = json.loads(_text(await catalog.read("hivegate://agent/config")))
    assert config["id"] == "files"
    assert config["page_size"] == 7
    assert config["skills"] == ["sum"]
    assert config["prompts"] == ["greet"]
    skills = json.loads(_text(await catalog.read("hivegate://agent/skills")))
    assert [s["id"] for s in skills] == ["sum"]
    assert all(catalog.owns(uri) for uri in BUILTIN_URIS)


# -- static resources -------------------------------------------------------------------


async def test_static_text_blob_and_path_resources(tree: Path) -> None:
    blob = base64.b64encode(b"\x01\x02").decode()
    catalog = _catalog(
        tree,
        resources=[
            {"uri": "x://text", "name": "text", "text": "hello"},
            {"uri": "x://md", "name": "md", "mime_type": "text/markdown", "text": "# hi"},
            {"uri": "x://blob", "name": "blob", "blob": blob},
            {"uri": "x://guide", "name": "guide", "path": "docs/guide.md"},
            {"uri": "x://binary", "name": "binary", "path": "data.bin"},
            {"uri": "x://alias", "name": "alias", "path": "alias.txt"},
        ],
    )
    assert [r.uri for r in catalog.resources][2:] == [
        "x://text",
        "x://md",
        "x://blob",
        "x://guide",
        "x://binary",
        "x://alias",
    ]

    [text] = await catalog.read("x://text")
    assert isinstance(text, TextResourceContents)
    assert (text.uri, text.mime_type, text.text) == ("x://text", "text/plain", "hello")
    [md] = await catalog.read("x://md")
    assert md.mime_type == "text/markdown"
    [raw] = await catalog.read("x://blob")
    assert isinstance(raw, BlobResourceContents)
    assert (raw.mime_type, raw.blob) == ("application/octet-stream", blob)
    [guide] = await catalog.read("x://guide")
    assert isinstance(guide, TextResourceContents)
    assert (guide.mime_type, guide.text) == ("text/markdown", "# Guide\n")
    [binary] = await catalog.read("x://binary")
    assert isinstance(binary, BlobResourceContents)
    assert base64.b64decode(binary.blob) == BINARY
    assert _text(await catalog.read("x://alias")) == "inside"  # a symlink that stays inside the root is fine


async def test_relative_root_resolves_against_the_agents_file_folder(tree: Path) -> None:
    spec = _spec(
        root="root", base_dir=str(tree.parent), resources=[{"uri": "x://in", "name": "in", "path": "inside.txt"}]
    )
    assert _text(await ResourceCatalog(spec).read("x://in")) == "inside"


async def test_static_paths_that_leave_the_root_are_not_found(tree: Path) -> None:
    catalog = _catalog(
        tree,
        resources=[
            {"uri": "x://dotdot", "name": "dotdot", "path": "../secret.txt"},
            {"uri": "x://absolute", "name": "absolute", "path": str(tree.parent / "secret.txt")},
            {"uri": "x://symlink", "name": "symlink", "path": "link-out.txt"},
            {"uri": "x://symlinked-dir", "name": "symlinked-dir", "path": "outdir/secret.txt"},
            {"uri": "x://missing", "name": "missing", "path": "nope.txt"},
        ],
    )
    for uri in ("x://dotdot", "x://absolute", "x://symlink", "x://symlinked-dir", "x://missing"):
        await _refused(catalog, uri)


async def test_path_resource_without_a_root_is_not_found(tree: Path) -> None:
    catalog = ResourceCatalog(_spec(resources=[{"uri": "x://in", "name": "in", "path": "inside.txt"}]))
    await _refused(catalog, "x://in")


async def test_unknown_uri_is_not_found(tree: Path) -> None:
    catalog = _catalog(tree, resources=[{"uri": "x://text", "name": "text", "text": "hello"}])
    assert not catalog.owns("x://other")
    await _refused(catalog, "x://other")
    await _refused(catalog, "hivegate://agent/other")


# -- templates with a path --------------------------------------------------------------

PATH_TEMPLATES: list[dict[str, Any]] = [
    {"uri_template": "doc://{name}", "name": "docs", "path": "docs/{name}.md"},
    {"uri_template": "file://{dir}/{name}", "name": "files", "path": "{dir}/{name}"},
    {"uri_template": "top://{name}", "name": "top", "path": "{name}"},
    {"uri_template": "deep://{+rest}", "name": "deep", "path": "{rest}"},
]


async def test_path_template_reads_files_under_the_root(tree: Path) -> None:
    catalog = _catalog(tree, resource_templates=PATH_TEMPLATES)
    assert [t.uri_template for t in catalog.templates] == [t["uri_template"] for t in PATH_TEMPLATES]
    assert catalog.owns("doc://guide")
    [guide] = await catalog.read("doc://guide")
    assert isinstance(guide, TextResourceContents)
    assert (guide.uri, guide.mime_type, guide.text) == ("doc://guide", "text/markdown", "# Guide\n")
    assert _text(await catalog.read("file://docs/guide.md")) == "# Guide\n"
    assert _text(await catalog.read("top://inside.txt")) == "inside"
    assert _text(await catalog.read("top://alias.txt")) == "inside"
    [binary] = await catalog.read("top://data.bin")
    assert isinstance(binary, BlobResourceContents)
    await _refused(catalog, "doc://missing")


@pytest.mark.parametrize(
    "uri",
    [
        "file://../secret.txt",  # `..` as a variable
        "file://%2E%2E/secret.txt",  # `..`, percent-encoded
        "top://..",
        "top://..%2Fsecret.txt",  # an encoded separator in one variable
        "top://..%5Csecret.txt",  # an encoded backslash
        "doc://..%2F..%2Fsecret",
        "file://outdir/secret.txt",  # a symlinked folder pointing outside
        "top://link-out.txt",  # a symlinked file pointing outside
        "top://%2Ftmp%2Fsecret.txt",  # an absolute path, encoded
        "deep://../secret.txt",
        "deep:///etc/passwd",  # an absolute path in a reserved expansion
        "deep://outdir/secret.txt",
        "top://inside.txt%00.md",  # a null byte
    ],
)
async def test_path_template_never_leaves_the_root(tree: Path, uri: str) -> None:
    catalog = _catalog(tree, resource_templates=PATH_TEMPLATES)
    await _refused(catalog, uri)


async def test_encoded_separator_is_refused_even_inside_the_root(tree: Path) -> None:
    """A variable that decodes to ``/`` is refused before joining (module docstring of hivegate.mcp.resources)."""
    catalog = _catalog(tree, resource_templates=PATH_TEMPLATES)
    await _refused(catalog, "top://docs%2Fguide.md")


# -- templates with text, or resolved by the backend -------------------------------------


async def test_text_template_fills_its_variables() -> None:
    catalog = ResourceCatalog(
        _spec(
            resource_templates=[
                {"uri_template": "greet://{who}", "name": "greet", "text": "Hello, {who}!"},
                {"uri_template": "pair://{x}/{y}", "name": "pair", "mime_type": "text/markdown", "text": "x={x} y={y}"},
            ]
        )
    )
    [greeting] = await catalog.read("greet://Ann%20Lee")
    assert isinstance(greeting, TextResourceContents)
    assert (greeting.uri, greeting.mime_type, greeting.text) == ("greet://Ann%20Lee", "text/plain", "Hello, Ann Lee!")
    [pair] = await catalog.read("pair://1/2")
    assert (pair.mime_type, _text([pair])) == ("text/markdown", "x=1 y=2")


async def test_text_template_inserts_values_literally() -> None:
    """A value that looks like a placeholder is data: it must not be expanded again."""
    catalog = ResourceCatalog(
        _spec(resource_templates=[{"uri_template": "pair://{x}/{y}", "name": "pair", "text": "x={x} y={y}"}])
    )
    assert _text(await catalog.read("pair://%7By%7D/2")) == "x={y} y=2"
    assert _text(await catalog.read("pair://1/%7Bx%7D")) == "x=1 y={x}"


async def test_template_without_path_or_text_belongs_to_the_backend() -> None:
    catalog = ResourceCatalog(_spec(resource_templates=[{"uri_template": "note://{id}", "name": "notes"}]))
    assert not catalog.owns("note://1")
    template = catalog.template_for("note://{id}")
    assert template is not None
    assert template.name == "notes"
    assert catalog.template_for("note://{other}") is None
    await _refused(catalog, "note://1")


def test_invalid_uri_template_is_refused_when_the_spec_is_validated() -> None:
    with pytest.raises(ValidationError, match="uri_template"):
        _spec(resource_templates=[{"uri_template": "bad://{unclosed", "name": "bad"}])
