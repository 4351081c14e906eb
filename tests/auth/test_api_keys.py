"""API keys: minting, recognising a presented key, digests and the constant-time digest search."""

from __future__ import annotations

import hashlib
import re

import pytest

from hivegate.auth.api_keys import (
    AGENT_KEY_PREFIX,
    KEY_LENGTH,
    USER_KEY_PREFIX,
    KeyKind,
    find_digest,
    key_digest,
    mint_key,
    parse_api_key,
)


@pytest.mark.parametrize(("kind", "prefix"), [(KeyKind.USER, "oag_"), (KeyKind.AGENT, "bak_")])
def test_minted_key_format(kind: KeyKind, prefix: str) -> None:
    minted = mint_key(kind)

    assert re.fullmatch(rf"{prefix}[0-9a-f]{{64}}", minted.plaintext)
    assert len(minted.plaintext) == KEY_LENGTH == 68
    assert minted.prefix == minted.plaintext[:12]
    assert minted.kind is kind


def test_minted_keys_differ() -> None:
    keys = {mint_key(KeyKind.USER).plaintext for _ in range(100)}
    assert len(keys) == 100


def test_digest_is_sha256_hex_and_not_the_key() -> None:
    minted = mint_key(KeyKind.AGENT)

    assert minted.digest == hashlib.sha256(minted.plaintext.encode()).hexdigest() == key_digest(minted.plaintext)
    assert re.fullmatch(r"[0-9a-f]{64}", minted.digest)
    assert minted.digest != minted.plaintext
    assert minted.plaintext[4:] not in minted.digest
    assert minted.plaintext not in repr(minted)


@pytest.mark.parametrize("kind", list(KeyKind))
def test_parse_recognises_minted_keys(kind: KeyKind) -> None:
    minted = mint_key(kind)

    presented = parse_api_key(minted.plaintext)
    assert presented is not None
    assert (presented.kind, presented.digest, presented.prefix) == (kind, minted.digest, minted.prefix)


GOOD_HEX = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "text",
    [
        "",
        "oag_",
        USER_KEY_PREFIX + GOOD_HEX[:-1],  # one short
        USER_KEY_PREFIX + GOOD_HEX + "0",  # one long
        AGENT_KEY_PREFIX + GOOD_HEX.upper(),  # upper-case hex
        USER_KEY_PREFIX + GOOD_HEX[:-1] + "g",  # not hex
        "OAG_" + GOOD_HEX,
        "xyz_" + GOOD_HEX,
        " " + USER_KEY_PREFIX + GOOD_HEX[:-1],
        USER_KEY_PREFIX + GOOD_HEX[:-1] + "\n",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",  # a JWT is not a key
        USER_KEY_PREFIX + "٠" * 64,  # Unicode digits are not hex
    ],
)
def test_parse_rejects_anything_else(text: str) -> None:
    assert parse_api_key(text) is None


def test_parse_accepts_the_exact_shape() -> None:
    assert parse_api_key(USER_KEY_PREFIX + GOOD_HEX) is not None
    assert parse_api_key(AGENT_KEY_PREFIX + GOOD_HEX) is not None


def test_find_digest() -> None:
    digests = [mint_key(KeyKind.USER).digest for _ in range(5)]

    assert find_digest(digests[3], digests) == digests[3]
    assert find_digest(mint_key(KeyKind.USER).digest, digests) is None
    assert find_digest(digests[0], []) is None
