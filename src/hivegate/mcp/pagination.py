"""Opaque, signed pagination cursors for the four MCP list methods.

A cursor encodes the list it belongs to (agent id and method) and the offset of the next
page, and carries an HMAC-SHA256 tag under the server's cursor key, so a client can neither
forge one nor replay one against another list.

Spec: MCP 2026-07-28 server/utilities/pagination (opaque cursors; an invalid cursor SHOULD be
-32602). The empty string is a valid cursor meaning "the first page".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Sequence
from typing import Generic, TypeVar

from hivegate.errors import InvalidCursorError

__all__ = ["CursorCodec", "Page"]

T = TypeVar("T")

_TAG_BYTES = 16


class Page(Generic[T]):
    """One page of a list: ``items`` and the cursor of the next page (None on the last page)."""

    __slots__ = ("items", "next_cursor")

    def __init__(self, items: list[T], next_cursor: str | None) -> None:
        self.items = items
        self.next_cursor = next_cursor


class CursorCodec:
    """Mints and verifies cursors with an HMAC key (bytes)."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    def _tag(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_TAG_BYTES]

    def encode(self, scope: str, offset: int) -> str:
        """A cursor for ``offset`` in the list named ``scope`` (e.g. ``"echo tools/list"``)."""
        payload = f"{offset}".encode()
        tag = self._tag(scope.encode() + b"\0" + payload)
        return base64.urlsafe_b64encode(payload + b"." + tag).decode().rstrip("=")

    def decode(self, scope: str, cursor: str | None) -> int:
        """The offset a cursor points at; None or ``""`` is offset 0.

        Raises:
            InvalidCursorError: the cursor is malformed, forged, or minted for another list.
        """
        if not cursor:
            return 0
        try:
            raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
            payload, _, tag = raw.partition(b".")
            offset = int(payload.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise InvalidCursorError("Invalid cursor") from None
        if offset < 0 or not hmac.compare_digest(tag, self._tag(scope.encode() + b"\0" + payload)):
            raise InvalidCursorError("Invalid cursor")
        return offset

    def paginate(self, scope: str, items: Sequence[T], cursor: str | None, page_size: int) -> Page[T]:
        """Slice ``items`` at ``cursor``; a cursor past the end yields an empty last page.

        Raises:
            InvalidCursorError: as :meth:`decode`.
        """
        offset = self.decode(scope, cursor)
        end = offset + page_size
        next_cursor = self.encode(scope, end) if end < len(items) else None
        return Page(list(items[offset:end]), next_cursor)
