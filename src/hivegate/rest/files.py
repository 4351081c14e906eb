"""``/api/v1/files``: upload a file for later calls, read its metadata and bytes, delete it (issue 10 item 3).

Routes (``docs/rest.md``, "Files"; product surface §6.6):

- ``POST /api/v1/files``: the body is the file, either raw (its ``Content-Type`` is the file's type; the
  name in the ``filename`` query parameter or the ``X-Filename`` header, percent-encoded UTF-8) or
  ``multipart/form-data`` with one file part named ``file`` (optional text fields ``filename`` and
  ``content_type`` override the part's). 201 with the file's metadata (``file_id`` first).
- ``GET /api/v1/files/{file_id}``: the metadata (``HEAD`` too).
- ``GET /api/v1/files/{file_id}/content``: the bytes, as a download (``Content-Disposition: attachment``,
  ``nosniff``, a sandboxing ``Content-Security-Policy``: an uploaded HTML file never runs on the gateway's
  origin).
- ``DELETE /api/v1/files/{file_id}``: 204; frees the owner's quota.

Credentials: those of ``GET /api/v1/agents`` (:meth:`~hivegate.auth.gate.EndpointGate.admit_discovery`:
``oag_``, ``bak_``, an OAuth token for ``/mcp``). Who sees which file: :meth:`~hivegate.files.uploads.Files.visible`;
any other file id is 404 ``not_found``, whether it exists or not. Limits: ``files.max_file_bytes`` (413,
also when ``Content-Length`` announces more, before reading), the per-user quota (413 ``quota_exceeded``).
Errors are the REST plane's envelope (:func:`~hivegate.rest.rendering.rest_error_response`).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import quote, unquote

from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from hivegate.auth.gate import EndpointGate
from hivegate.auth.principal import Principal
from hivegate.errors import (
    GatewayError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotAllowedError,
    NotFoundError,
    PayloadTooLargeError,
)
from hivegate.files.uploads import MAX_CONTENT_TYPE_CHARS, MAX_FILENAME_CHARS, Files
from hivegate.mcp.transport import decode_headers
from hivegate.rest.rendering import rest_error_response
from hivegate.storage.files import FileRecord

__all__ = ["FILES_PATH", "FilesEndpoint", "file_document"]

FILES_PATH = "/api/v1/files"
MULTIPART_OVERHEAD_BYTES = 64 * 1024
"""Bytes a multipart body may carry besides the file (boundaries, part headers, two short fields)."""
CHUNK_BYTES = 64 * 1024
_MEDIA_TYPE = re.compile(r"^[A-Za-z0-9!#$&^_.+-]+/[A-Za-z0-9!#$&^_.+-]+(\s*;[\x20-\x7e]*)?$")
_NO_STORE = {"Cache-Control": "private, no-store", "Vary": "Authorization"}
DEFAULT_CONTENT_TYPE = "application/octet-stream"


def file_document(record: FileRecord, base: str) -> dict[str, Any]:
    """The metadata of ``record`` as JSON: ``file_id``, ``filename``, ``content_type``, ``size``, ``sha256``,
    ``created_at``, ``expires_at`` (RFC 3339), ``download_url`` (the ``/content`` URL; same credentials)."""
    return {
        "file_id": record.id,
        "filename": record.filename,
        "content_type": record.content_type,
        "size": record.size,
        "sha256": record.sha256,
        "created_at": record.created_at.isoformat(),
        "expires_at": record.expires_at.isoformat(),
        "download_url": f"{base}{FILES_PATH}/{record.id}/content",
    }


def _param(name: str, message: str) -> InvalidParamsError:
    return InvalidParamsError(message, data={"param": name})


def check_filename(value: str | None) -> str:
    """A file's name: 1 to 512 characters, no control characters.

    Raises:
        InvalidParamsError: missing or not such a name (``param`` ``filename``).
    """
    if not value or len(value) > MAX_FILENAME_CHARS or not value.isprintable():
        raise _param("filename", f"'filename' is required: 1 to {MAX_FILENAME_CHARS} printable characters")
    return value


def check_content_type(value: str | None) -> str:
    """A file's MIME type (``type/subtype`` with optional parameters, at most 255 characters); absent: octet-stream.

    Raises:
        InvalidParamsError: not such a type (``param`` ``content_type``).
    """
    if value is None or value == "":
        return DEFAULT_CONTENT_TYPE
    if len(value) > MAX_CONTENT_TYPE_CHARS or _MEDIA_TYPE.fullmatch(value) is None:
        raise _param(
            "content_type", f"the content type must be a MIME type of at most {MAX_CONTENT_TYPE_CHARS} characters"
        )
    return value


def _limited(receive: Receive, limit_bytes: int) -> Receive:
    """``receive`` that raises :class:`PayloadTooLargeError` once the body passes ``limit_bytes``."""
    seen = 0

    async def counted() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit_bytes:
                raise PayloadTooLargeError(f"Request body exceeds {limit_bytes} bytes")
        return message

    return counted


async def _body_chunks(receive: Receive) -> AsyncIterator[bytes]:
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise InvalidRequestError("the client went away before the whole file arrived")
        chunk: bytes = message.get("body", b"")
        if chunk:
            yield chunk
        if not message.get("more_body", False):
            return


async def _upload_chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(CHUNK_BYTES):
        yield chunk


class FilesEndpoint:
    """The ASGI app of ``/api/v1/files`` and below (module docstring); other ``/api/…`` paths are 404.

    Args:
        files: the uploaded files. gate: the credential gate. base: ``Settings.base_url()``.
    """

    def __init__(self, files: Files, gate: EndpointGate, base: str) -> None:
        self._files = files
        self._gate = gate
        self._base = base

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            response = await self._serve(scope, receive)
        except GatewayError as exc:
            response = rest_error_response(exc)
        await response(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive) -> Response:
        path: str = scope["path"]
        method: str = scope["method"]
        if path == FILES_PATH:
            return await self._collection(scope, receive, method)
        tail = path.removeprefix(FILES_PATH + "/").split("/") if path.startswith(FILES_PATH + "/") else []
        if len(tail) == 1 and tail[0]:
            allowed = ("GET", "HEAD", "DELETE")
            principal = await self._admit(scope, method, allowed)
            if method == "DELETE":
                await self._files.delete(principal, tail[0])
                return Response(status_code=204, headers=_NO_STORE)
            record = await self._files.get(principal, tail[0])
            return JSONResponse(file_document(record, self._base), headers=_NO_STORE)
        if len(tail) == 2 and tail[0] and tail[1] == "content":
            principal = await self._admit(scope, method, ("GET", "HEAD"))
            return await self._content(await self._files.get(principal, tail[0]), method)
        raise NotFoundError("No such path under /api")

    async def _admit(self, scope: Scope, method: str, allowed: tuple[str, ...]) -> Principal:
        if method not in allowed:
            error = MethodNotAllowedError(f"{method[:20]} is not allowed here")
            error.headers["Allow"] = ", ".join(allowed)
            raise error
        return await self._gate.admit_discovery(decode_headers(scope))

    async def _collection(self, scope: Scope, receive: Receive, method: str) -> Response:
        principal = await self._admit(scope, method, ("POST",))
        request = Request(scope, receive)
        media_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        limit = self._files.limits.max_file_bytes
        if media_type == "multipart/form-data":
            limit += MULTIPART_OVERHEAD_BYTES
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise PayloadTooLargeError(f"Request body exceeds {limit} bytes")
        if media_type == "multipart/form-data":
            record = await self._multipart(principal, Request(scope, _limited(receive, limit)))
        else:
            raw_name = request.query_params.get("filename") or request.headers.get("x-filename")
            try:
                filename = check_filename(unquote(raw_name, errors="strict") if raw_name else None)
            except UnicodeDecodeError:
                raise _param("filename", "'filename' must be percent-encoded UTF-8") from None
            content_type = check_content_type(request.headers.get("content-type"))
            record = await self._files.upload(principal, filename, content_type, _body_chunks(receive))
        return JSONResponse(file_document(record, self._base), status_code=201, headers=_NO_STORE)

    async def _multipart(self, principal: Principal, request: Request) -> FileRecord:
        try:
            async with request.form(max_files=1, max_fields=2, max_part_size=4096) as form:
                upload = form.get("file")
                if not isinstance(upload, UploadFile):
                    raise _param("file", "the form needs one file part named 'file'")
                name_field, type_field = form.get("filename"), form.get("content_type")
                filename = check_filename(name_field if isinstance(name_field, str) else upload.filename)
                content_type = check_content_type(type_field if isinstance(type_field, str) else upload.content_type)
                return await self._files.upload(principal, filename, content_type, _upload_chunks(upload))
        except MultiPartException as exc:
            raise InvalidRequestError(f"Invalid multipart body: {exc.message}") from None

    async def _content(self, record: FileRecord, method: str) -> Response:
        headers = {
            **_NO_STORE,
            "Content-Length": str(record.size),
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(record.filename, safe='')}",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "sandbox; default-src 'none'",
        }
        if method == "HEAD":
            return Response(status_code=200, headers=headers, media_type=record.content_type)
        return StreamingResponse(self._files.content(record), headers=headers, media_type=record.content_type)
