"""Attachments by ``file_id``: what each plane's wire form becomes, and their resolution before a call.

Each plane turns its attachments into :class:`~hivegate.backends.base.Attachment` values; one that names
an uploaded file carries only ``file_id`` (and the caller's ``name`` / ``mime_type``):

- MCP ``tools/call`` (message tool): ``arguments.attachments[]`` items ``{file_id, filename?,
  content_type?}`` (inline ``{name?, mimeType?, uri?, data?}`` items keep working);
- REST invoke: ``attachments[]`` items ``{file_id, filename?, content_type?}`` (or inline ones);
- A2A: a ``url`` part whose URL is ``hivegate:file/<file_id>`` (:data:`A2A_FILE_URL_PREFIX`), its
  ``filename`` and ``mediaType`` as the name and type.

At the plane's entry, before anything is invoked, :func:`resolve_attachments` checks them all: at most
:data:`MAX_ATTACHMENTS`, each ``file_id`` a file the caller may see (:meth:`~hivegate.files.uploads.Files.visible`)
and not bound to another agent, all together within ``files.max_attachment_bytes_per_call``; then reads
each file's bytes into ``content``. Any failure is :class:`~hivegate.errors.InvalidParamsError`
(``invalid_params``; the original's ``invalid_param``) with ``data`` ``{"code": "invalid_params",
"param": "attachments[<i>].file_id"}``, the same for a missing, expired and another user's file.

Spec: product surface §3.4 item 2 and 4, §6.2 (``attachments``, ≤16), §10.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from hivegate.auth.principal import Principal
from hivegate.backends.base import Attachment
from hivegate.errors import InvalidParamsError, NotFoundError
from hivegate.files.uploads import MAX_CONTENT_TYPE_CHARS, MAX_FILENAME_CHARS, Files
from hivegate.storage.files import FileRecord

__all__ = [
    "A2A_FILE_URL_PREFIX",
    "MAX_ATTACHMENTS",
    "MAX_FILE_ID_CHARS",
    "check_attachments",
    "file_reference",
    "resolve_attachments",
]

MAX_ATTACHMENTS = 16
"""Most attachments one call may carry (the original's ``attachments`` ≤16, product surface §10)."""

MAX_FILE_ID_CHARS = 128
"""The original's bound on a ``file_id``."""

A2A_FILE_URL_PREFIX = "hivegate:file/"
"""An A2A ``url`` part naming an uploaded file: ``hivegate:file/<file_id>``."""


def _invalid(param: str, message: str) -> InvalidParamsError:
    return InvalidParamsError(message, data={"code": InvalidParamsError.code, "param": param})


def file_reference(file_id: object, filename: object = None, content_type: object = None) -> Attachment:
    """The unresolved attachment of a wire item ``{file_id, filename?, content_type?}``.

    Raises:
        InvalidParamsError: a member of the wrong type or length.
    """
    if not isinstance(file_id, str) or not 0 < len(file_id) <= MAX_FILE_ID_CHARS:
        raise _invalid(
            "attachments", f"an attachment's 'file_id' must be a string of 1 to {MAX_FILE_ID_CHARS} characters"
        )
    for name, value, bound in (
        ("filename", filename, MAX_FILENAME_CHARS),
        ("content_type", content_type, MAX_CONTENT_TYPE_CHARS),
    ):
        if value is not None and (not isinstance(value, str) or len(value) > bound):
            raise _invalid("attachments", f"an attachment's '{name}' must be a string of at most {bound} characters")
    return Attachment(
        name=filename if isinstance(filename, str) else None,
        mime_type=content_type if isinstance(content_type, str) else None,
        file_id=file_id,
    )


async def check_attachments(
    files: Files | None, principal: Principal, agent_id: str, attachments: Sequence[Attachment]
) -> list[FileRecord | None]:
    """Check ``attachments`` for a call of ``agent_id`` by ``principal`` without reading any bytes (module docstring).

    Returns:
        Per attachment, the record of the file it names, or None for an inline attachment.

    Raises:
        InvalidParamsError: too many attachments, or a ``file_id`` the caller may not use here, or too many bytes.
    """
    if len(attachments) > MAX_ATTACHMENTS:
        raise _invalid("attachments", f"at most {MAX_ATTACHMENTS} attachments per call")
    records: list[FileRecord | None] = []
    now = datetime.now(UTC)
    total = 0
    for index, attachment in enumerate(attachments):
        if attachment.file_id is None or attachment.content is not None:
            records.append(None)
            continue
        param = f"attachments[{index}].file_id"
        record = await files.store.get(attachment.file_id) if files is not None else None
        if record is None or not Files.visible(principal, record, now) or record.agent_id not in (None, agent_id):
            raise _invalid(param, f"{param}: no such file")
        total += record.size
        assert files is not None
        if total > files.limits.max_attachment_bytes_per_call:
            limit = files.limits.max_attachment_bytes_per_call
            raise _invalid(param, f"the attached files exceed {limit} bytes per call")
        records.append(record)
    return records


async def resolve_attachments(
    files: Files | None, principal: Principal, agent_id: str, attachments: Sequence[Attachment]
) -> tuple[Attachment, ...]:
    """``attachments`` with every ``file_id`` resolved to the file's bytes and metadata (module docstring).

    Inline attachments pass unchanged; a call without ``file_id`` attachments costs no store access.

    Raises:
        InvalidParamsError: as :func:`check_attachments`, or a file purged before its bytes were read.
    """
    if not attachments:
        return ()
    if len(attachments) <= MAX_ATTACHMENTS and all(a.file_id is None or a.content is not None for a in attachments):
        return tuple(attachments)
    records = await check_attachments(files, principal, agent_id, attachments)
    resolved: list[Attachment] = []
    for index, (attachment, record) in enumerate(zip(attachments, records, strict=True)):
        if record is None:
            resolved.append(attachment)
            continue
        assert files is not None  # a record was found in it
        try:
            content = await files.read(record)
        except NotFoundError:
            raise _invalid(f"attachments[{index}].file_id", f"attachments[{index}].file_id: no such file") from None
        resolved.append(
            replace(
                attachment,
                name=attachment.name or record.filename,
                mime_type=attachment.mime_type or record.content_type,
                content=content,
                size=record.size,
                sha256=record.sha256,
            )
        )
    return tuple(resolved)
