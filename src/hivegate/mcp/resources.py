"""An agent's own resources: the built-in ``hivegate://agent/*`` documents, static resources and templates.

File-backed resources and templates never read outside the agent's root: the path is joined
with :func:`mcp.shared.path_security.safe_join`, which refuses ``..``, absolute parts, null
bytes and symlinks that resolve elsewhere; a template variable that decodes to a path
separator (``%2F``) is refused before joining.

Spec: MCP 2026-07-28 server/resources (``resources/list``, ``resources/read``,
``resources/templates/list``); RFC 6570 for ``uriTemplate``.
"""

from __future__ import annotations

import base64
import json
import mimetypes
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.path_security import PathEscapeError, safe_join
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate
from mcp_types import BlobResourceContents, Resource, ResourceTemplate, TextResourceContents

from hivegate.agents.model import AgentSpec, ResourceSpec, ResourceTemplateSpec
from hivegate.errors import ResourceNotFoundError
from hivegate.mcp.placeholders import fill_placeholders

__all__ = ["BUILTIN_URIS", "ResourceCatalog"]

CONFIG_URI = "hivegate://agent/config"
SKILLS_URI = "hivegate://agent/skills"
BUILTIN_URIS = (CONFIG_URI, SKILLS_URI)

Contents = TextResourceContents | BlobResourceContents


def _agent_root(spec: AgentSpec) -> Path | None:
    if spec.root is None:
        return None
    root = Path(spec.root)
    if not root.is_absolute() and spec.base_dir is not None:
        root = Path(spec.base_dir) / root
    return root


def _config_document(spec: AgentSpec, default_page_size: int) -> dict[str, Any]:
    return {
        "id": spec.id,
        "name": spec.name,
        "description": spec.description,
        "version": spec.version,
        "mcp_enabled": spec.mcp_enabled,
        "page_size": spec.page_size or default_page_size,
        "cache": spec.cache.model_dump(mode="json"),
        "skills": [s.id for s in spec.skills],
        "prompts": [p.name for p in spec.prompts],
    }


def _skills_document(spec: AgentSpec) -> list[dict[str, Any]]:
    return [s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in spec.skills]


class ResourceCatalog:
    """The resources an agent spec declares, plus the built-ins. Built once per spec; reads are async."""

    def __init__(self, spec: AgentSpec, default_page_size: int = 50) -> None:
        self._spec = spec
        self._default_page_size = default_page_size
        self._root = _agent_root(spec)
        self._static = {r.uri: r for r in spec.resources}
        self._templates: list[tuple[UriTemplate, ResourceTemplateSpec]] = []
        for template in spec.resource_templates:
            try:
                self._templates.append((UriTemplate.parse(template.uri_template), template))
            except InvalidUriTemplate as exc:
                raise ValueError(f"agent {spec.id!r}: invalid uriTemplate {template.uri_template!r}: {exc}") from exc
        self.resources: list[Resource] = [
            Resource(
                uri=CONFIG_URI,
                name="agent-config",
                title=f"{spec.name} configuration",
                description="This agent's public configuration (JSON).",
                mime_type="application/json",
            ),
            Resource(
                uri=SKILLS_URI,
                name="agent-skills",
                title=f"{spec.name} skills",
                description="This agent's skills (JSON).",
                mime_type="application/json",
            ),
        ] + [
            Resource(uri=r.uri, name=r.name, title=r.title, description=r.description, mime_type=r.mime_type)
            for r in spec.resources
        ]
        self.templates: list[ResourceTemplate] = [
            ResourceTemplate(
                uri_template=t.uri_template,
                name=t.name,
                title=t.title,
                description=t.description,
                mime_type=t.mime_type,
            )
            for t in spec.resource_templates
        ]

    def template_for(self, uri_template: str) -> ResourceTemplateSpec | None:
        """The declared template with exactly this ``uriTemplate``, or None."""
        return next((t for _, t in self._templates if t.uri_template == uri_template), None)

    def owns(self, uri: str) -> bool:
        """Whether ``uri`` is a built-in, a static resource, or matches a template this spec resolves itself."""
        if uri in BUILTIN_URIS or uri in self._static:
            return True
        return any(t.path is not None or t.text is not None for _, t in self._match(uri))

    def _match(self, uri: str) -> list[tuple[dict[str, Any], ResourceTemplateSpec]]:
        found: list[tuple[dict[str, Any], ResourceTemplateSpec]] = []
        for parsed, template in self._templates:
            values = parsed.match(uri)
            if values is not None:
                found.append((values, template))
        return found

    async def read(self, uri: str) -> list[Contents]:
        """The contents of ``uri``.

        Raises:
            ResourceNotFoundError: no such resource, a template variable is unsafe, or the file is missing.
        """
        if uri == CONFIG_URI:
            return [_json_contents(uri, _config_document(self._spec, self._default_page_size))]
        if uri == SKILLS_URI:
            return [_json_contents(uri, _skills_document(self._spec))]
        static = self._static.get(uri)
        if static is not None:
            return [await self._read_static(static)]
        for values, template in self._match(uri):
            if template.path is None and template.text is None:
                continue
            flat = {k: v if isinstance(v, str) else ",".join(v) for k, v in values.items()}
            if template.text is not None:
                return [
                    TextResourceContents(
                        uri=uri,
                        mime_type=template.mime_type or "text/plain",
                        text=fill_placeholders(template.text, flat),
                    )
                ]
            assert template.path is not None  # the loop skipped templates with neither
            if any("/" in v or "\\" in v for v in flat.values()):
                raise ResourceNotFoundError(uri)
            return [await self._read_file(uri, fill_placeholders(template.path, flat), template.mime_type)]
        raise ResourceNotFoundError(uri)

    async def _read_static(self, resource: ResourceSpec) -> Contents:
        if resource.text is not None:
            return TextResourceContents(
                uri=resource.uri, mime_type=resource.mime_type or "text/plain", text=resource.text
            )
        if resource.blob is not None:
            return BlobResourceContents(
                uri=resource.uri, mime_type=resource.mime_type or "application/octet-stream", blob=resource.blob
            )
        assert resource.path is not None  # ResourceSpec requires exactly one source
        return await self._read_file(resource.uri, resource.path, resource.mime_type)

    async def _read_file(self, uri: str, relative: str, mime_type: str | None) -> Contents:
        if self._root is None:
            raise ResourceNotFoundError(uri)
        try:
            path = safe_join(self._root, relative)
            data = await anyio.Path(path).read_bytes()
        except (PathEscapeError, OSError):
            raise ResourceNotFoundError(uri) from None
        mime = mime_type or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        try:
            return TextResourceContents(uri=uri, mime_type=mime, text=data.decode("utf-8"))
        except UnicodeDecodeError:
            return BlobResourceContents(uri=uri, mime_type=mime, blob=base64.b64encode(data).decode("ascii"))


def _json_contents(uri: str, document: Any) -> TextResourceContents:
    return TextResourceContents(uri=uri, mime_type="application/json", text=json.dumps(document, indent=2))
