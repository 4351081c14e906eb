"""Password hashing with argon2id."""

from __future__ import annotations

import pytest
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError

from hivegate.auth.passwords import hash_password, password_needs_rehash, verify_password

CHEAP = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)


def test_hash_and_verify() -> None:
    encoded = hash_password("correct horse")

    assert encoded.startswith("$argon2id$")
    assert "correct horse" not in encoded
    assert verify_password(encoded, "correct horse")
    assert not verify_password(encoded, "correct horsE")
    assert not verify_password(encoded, "")


def test_hashes_are_salted() -> None:
    assert hash_password("same", hasher=CHEAP) != hash_password("same", hasher=CHEAP)


@pytest.mark.parametrize("garbage", ["", "plaintext", "$argon2id$v=19$broken", "$2b$12$abcdefghijklmnopqrstuv"])
def test_verify_malformed_hash_is_false(garbage: str) -> None:
    assert not verify_password(garbage, "anything")


def test_needs_rehash_when_parameters_change() -> None:
    cheap = hash_password("pw", hasher=CHEAP)

    assert not password_needs_rehash(cheap, hasher=CHEAP)
    assert password_needs_rehash(cheap)
    assert not password_needs_rehash(hash_password("pw"))
    assert verify_password(cheap, "pw")  # any argon2 parameters verify


def test_needs_rehash_on_a_foreign_hash_raises() -> None:
    with pytest.raises(InvalidHashError):
        password_needs_rehash("plaintext")
