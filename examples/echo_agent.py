"""The ``echo`` demo agent: replies with the message it got, streamed word by word."""

from __future__ import annotations

from collections.abc import AsyncIterator

from hivegate.backends.base import Invocation


async def reply(invocation: Invocation) -> AsyncIterator[str]:
    """Yield the message back one word at a time (each word is one reply delta)."""
    words = invocation.message.split(" ")
    for index, word in enumerate(words):
        yield word if index == len(words) - 1 else word + " "
