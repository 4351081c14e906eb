"""A Bloom filter of idempotency-key identities: which keys the database certainly does not hold.

A keyed call reads its key's record before it runs (a replay or a conflict answers without invoking).
Nearly every key is fresh, and on SQLite the gateway is the database's only writer
(:attr:`~hivegate.storage.calls.CallRecords.single_writer`), so it can know which keys were ever
written: the identities found in the table when the filter was built, and every one it has written
since. A key the filter does not hold was never written, and its read is skipped; a key it may hold
(every written one, and about 1 % of the others) is read as before. The filter only ever answers
"certainly not" for a key no record has, so a replay or a conflict is never missed.

Sizing: :data:`BITS_PER_KEY` bits and :data:`HASHES` probe positions per expected key (about 1 %
false positives at capacity; more beyond it, which costs reads, never correctness).

The probes come from Python's own (per-process keyed) hash of the identity: the filter is built and
used in one process.

Source: Burton H. Bloom, "Space/time trade-offs in hash coding with allowable errors", CACM 13(7), 1970;
the two-hash probe sequence of Kirsch and Mitzenmacher, "Less hashing, same performance", ESA 2006.
"""

from __future__ import annotations

__all__ = ["BITS_PER_KEY", "HASHES", "MAX_CAPACITY", "MIN_CAPACITY", "KeyFilter"]

BITS_PER_KEY = 10
"""Bits of the filter per key it is sized for (with :data:`HASHES` probes: about 1 % false positives)."""

HASHES = 7
"""Probe positions per key."""

MIN_CAPACITY = 1 << 16
"""The fewest keys a filter is sized for (80 KiB)."""

MAX_CAPACITY = 1 << 25
"""The most keys a filter is sized for (40 MiB); beyond, false positives grow (more reads, same answers)."""

_MASK64 = (1 << 64) - 1


class KeyFilter:
    """A Bloom filter over (user id, agent id, key) identities.

    Args:
        capacity: the keys it is sized for (clamped to :data:`MIN_CAPACITY`–:data:`MAX_CAPACITY`);
            :attr:`full` once more were added.

    Not thread-safe: one thread adds and asks (a filter built in a worker thread is handed over whole).
    """

    __slots__ = ("_bits", "_size", "capacity", "count")

    def __init__(self, capacity: int) -> None:
        self.capacity = min(max(capacity, MIN_CAPACITY), MAX_CAPACITY)
        self._size = self.capacity * BITS_PER_KEY
        self._bits = bytearray((self._size + 7) // 8)
        self.count = 0
        """Keys added (a key added twice counts twice)."""

    @property
    def full(self) -> bool:
        """More keys were added than the filter is sized for (a larger one should be built)."""
        return self.count > self.capacity

    def add(self, user_id: str, agent_id: str, key: str) -> None:
        """Remember the identity (:meth:`may_hold` answers True for it from now on)."""
        bits, size = self._bits, self._size
        first, step = _hashes(user_id, agent_id, key)
        for _ in range(HASHES):
            position = first % size
            bits[position >> 3] |= 1 << (position & 7)
            first = (first + step) & _MASK64
        self.count += 1

    def may_hold(self, user_id: str, agent_id: str, key: str) -> bool:
        """False: the identity was never added. True: it may have been (always, when it was)."""
        bits, size = self._bits, self._size
        first, step = _hashes(user_id, agent_id, key)
        for _ in range(HASHES):
            position = first % size
            if not bits[position >> 3] & (1 << (position & 7)):
                return False
            first = (first + step) & _MASK64
        return True


def _hashes(user_id: str, agent_id: str, key: str) -> tuple[int, int]:
    """The identity's first probe and the odd step between probes, from Python's own hash of the tuple.

    That hash (SipHash over each string, its per-string value cached by the interpreter) is keyed per
    process (``PYTHONHASHSEED``), so it differs from one process to the next; a filter lives and is
    rebuilt in one process, so that is all it needs. A caller cannot aim keys at one filter's bits
    without the process's hash key; should it manage to, more keys are read, none is missed.
    """
    mixed = hash((user_id, agent_id, key)) & _MASK64
    return mixed, (mixed >> 32) | (mixed << 32) & _MASK64 | 1
