"""CursorCodec: signed, list-scoped pagination cursors.

Spec: MCP 2026-07-28 server/utilities/pagination (opaque cursors; the empty string is the
first page; an invalid cursor SHOULD be -32602).
"""

from __future__ import annotations

import base64

import pytest

from hivegate.errors import InvalidCursorError
from hivegate.mcp.pagination import CursorCodec

SCOPE = "echo resources/list"
ITEMS = ["a", "b", "c", "d", "e"]


@pytest.fixture
def codec() -> CursorCodec:
    return CursorCodec(b"test-cursor-key")


def _walk(codec: CursorCodec, items: list[str], page_size: int) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor: str | None = None
    for _ in range(len(items) + 2):  # bounded: a correct walk needs at most len(items) pages
        page = codec.paginate(SCOPE, items, cursor, page_size)
        pages.append(page.items)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor
    raise AssertionError(f"pagination did not end: {pages}")


def test_round_trip(codec: CursorCodec) -> None:
    for offset in (0, 1, 7, 1000, 10**12):
        assert codec.decode(SCOPE, codec.encode(SCOPE, offset)) == offset


def test_cursor_is_opaque_url_safe_text(codec: CursorCodec) -> None:
    cursor = codec.encode(SCOPE, 3)
    assert cursor not in ("", "3")
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


@pytest.mark.parametrize("page_size", [1, 2, 3, 5, 50])
def test_walk_returns_every_item_once_in_order(codec: CursorCodec, page_size: int) -> None:
    pages = _walk(codec, ITEMS, page_size)
    assert [item for page in pages for item in page] == ITEMS
    assert all(len(page) == page_size for page in pages[:-1])
    assert 0 < len(pages[-1]) <= page_size


def test_empty_list_is_one_empty_page(codec: CursorCodec) -> None:
    page = codec.paginate(SCOPE, [], None, 3)
    assert page.items == []
    assert page.next_cursor is None


@pytest.mark.parametrize("first", [None, ""])
def test_none_and_empty_string_are_the_first_page(codec: CursorCodec, first: str | None) -> None:
    assert codec.decode(SCOPE, first) == 0
    page = codec.paginate(SCOPE, ITEMS, first, 2)
    assert page.items == ["a", "b"]
    assert page.next_cursor is not None
    assert codec.decode(SCOPE, page.next_cursor) == 2


def test_cursor_past_the_end_is_an_empty_last_page(codec: CursorCodec) -> None:
    for offset in (len(ITEMS), len(ITEMS) + 10):
        page = codec.paginate(SCOPE, ITEMS, codec.encode(SCOPE, offset), 2)
        assert page.items == []
        assert page.next_cursor is None


def test_last_full_page_has_no_next_cursor(codec: CursorCodec) -> None:
    page = codec.paginate(SCOPE, ITEMS[:4], codec.encode(SCOPE, 2), 2)
    assert page.items == ["c", "d"]
    assert page.next_cursor is None


def test_cursor_of_another_list_is_refused(codec: CursorCodec) -> None:
    cursor = codec.encode("echo tools/list", 1)
    for other in ("echo prompts/list", "notes tools/list", "echo tools/list ", ""):
        with pytest.raises(InvalidCursorError) as refused:
            codec.decode(other, cursor)
        assert refused.value.code == "invalid_cursor"


def test_cursor_signed_with_another_key_is_refused(codec: CursorCodec) -> None:
    foreign = CursorCodec(b"another-key").encode(SCOPE, 1)
    with pytest.raises(InvalidCursorError):
        codec.decode(SCOPE, foreign)


def test_forged_cursors_are_refused(codec: CursorCodec) -> None:
    genuine = codec.encode(SCOPE, 2)
    raw = base64.urlsafe_b64decode(genuine + "=" * (-len(genuine) % 4))
    payload, _, tag = raw.partition(b".")
    assert payload == b"2"

    def pack(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).decode().rstrip("=")

    forgeries = [
        pack(b"3." + tag),  # another offset under the old tag
        pack(b"2." + bytes(len(tag))),  # a zeroed tag
        pack(b"2." + tag[:-1]),  # a truncated tag
        pack(b"2."),  # no tag
        pack(b"2"),  # no separator
        pack(b"2." + tag + b"x"),  # trailing bytes
        genuine[:-2],
    ]
    for forged in forgeries:
        with pytest.raises(InvalidCursorError):
            codec.decode(SCOPE, forged)


@pytest.mark.parametrize(
    "garbage", ["garbage", "!!!", "....", "=", "é", "\x00", "a" * 5000, "MA", "Lg", "LTE", "bm90LWEtbnVtYmVy"]
)
def test_garbage_cursors_are_refused(codec: CursorCodec, garbage: str) -> None:
    with pytest.raises(InvalidCursorError):
        codec.decode(SCOPE, garbage)
    with pytest.raises(InvalidCursorError):
        codec.paginate(SCOPE, ITEMS, garbage, 2)


def test_negative_offset_is_refused_even_when_signed(codec: CursorCodec) -> None:
    negative = codec.encode(SCOPE, -1)
    with pytest.raises(InvalidCursorError):
        codec.decode(SCOPE, negative)
    with pytest.raises(InvalidCursorError):
        codec.paginate(SCOPE, ITEMS, negative, 2)


def test_invalid_cursor_renders_as_invalid_params() -> None:
    error = InvalidCursorError("Invalid cursor")
    assert (error.code, error.http_status, error.jsonrpc_code) == ("invalid_cursor", 400, -32602)
