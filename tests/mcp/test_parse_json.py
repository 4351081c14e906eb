"""``parse_json``: strict JSON in, -32700 only for what is not JSON, -32600 for JSON the server cannot represent.

Found by issue 8's attack trial: an id of ``10**400`` (valid JSON, RFC 8259 §6) was answered -32700
Parse error because orjson refuses numbers beyond a 64-bit float. RFC 8259 §6 and §8.2 let a parser
limit numbers and unpaired surrogates; the answer is then "Invalid Request", never "Parse error".
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hivegate.errors import InvalidRequestError, ParseError
from hivegate.mcp.transport import parse_json

_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(), children, max_size=5),
    max_leaves=30,
)


@given(_json_values)
@settings(max_examples=300, deadline=None)
def test_json_the_server_can_represent_round_trips(value: Any) -> None:
    assert parse_json(json.dumps(value).encode()) == value


@given(st.binary(max_size=200))
@settings(max_examples=500, deadline=None)
def test_any_bytes_give_a_value_or_one_of_the_two_json_rpc_errors(body: bytes) -> None:
    with contextlib.suppress(ParseError, InvalidRequestError):  # anything else fails the test
        parse_json(body)


@given(st.integers(min_value=309, max_value=4000), st.booleans())
@settings(max_examples=100, deadline=None)
def test_a_number_beyond_a_64_bit_float_is_an_invalid_request(digits: int, negative: bool) -> None:
    number = ("-" if negative else "") + "9" * digits
    with pytest.raises(InvalidRequestError) as raised:
        parse_json(b'{"jsonrpc":"2.0","id":' + number.encode() + b',"method":"ping"}')
    assert not isinstance(raised.value, ParseError)
    assert raised.value.jsonrpc_code == -32600


@pytest.mark.parametrize(
    "body",
    [b'{"id": 1e400}', b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"s":"\\ud800"}}', b"[" + b"9" * 400 + b"]"],
)
def test_valid_json_the_server_cannot_represent_is_an_invalid_request(body: bytes) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        parse_json(body)
    assert type(raised.value) is InvalidRequestError


@pytest.mark.parametrize("body", [b"", b"{bad", b"NaN", b'{"a": Infinity}', b"[-Infinity]", b"\xff\xfe{", b"{}garbage"])
def test_what_is_not_json_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError):
        parse_json(body)
