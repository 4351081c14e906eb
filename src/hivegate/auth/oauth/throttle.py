"""Sign-in throttling for the OAuth login form: a sliding window of failures per username and per client address.

After ``max_failures`` failed sign-ins within ``window_seconds`` for one username (compared
ignoring case) **or** from one client address, further attempts for that key are refused
(the login form answers 429 with ``Retry-After``) until the oldest failure in the window
ages out. Refused attempts are not verified, so they neither count nor reveal anything.
A successful sign-in clears its username's failures, not its address's (one valid account
must not reset an address that is guessing other accounts' passwords).

The state is in-process (one gateway process, or each replica on its own) and bounded:
at most :data:`MAX_TRACKED_KEYS` keys are tracked; when full, keys whose failures have all
aged out are dropped first, then the least recently failed ones.

Sources: OWASP Authentication Cheat Sheet ("Protect against automated attacks"), NIST SP
800-63B §5.2.2 (rate limiting).
"""

from __future__ import annotations

import ipaddress
import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["MAX_TRACKED_KEYS", "AddressLimit", "LoginThrottle", "address_key"]

MAX_TRACKED_KEYS = 10_000
"""Keys (usernames and addresses) whose recent failures are remembered at once."""


class LoginThrottle:
    """Count failed sign-ins per username and per client address over a sliding window.

    Args:
        max_failures: failures within the window after which a key is throttled (≥ 1).
        window_seconds: the window's length (> 0).
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(
        self, max_failures: int, window_seconds: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if max_failures < 1 or window_seconds <= 0:
            raise ValueError("max_failures must be ≥ 1 and window_seconds > 0")
        self._max = max_failures
        self._window = window_seconds
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    @staticmethod
    def _keys(username: str, address: str | None) -> list[str]:
        keys = [f"user:{username.strip().casefold()}"]
        if address:
            keys.append(f"addr:{address}")
        return keys

    def retry_after(self, username: str, address: str | None) -> int | None:
        """Whole seconds until ``username`` from ``address`` may try again, or None when not throttled."""
        now = self._clock()
        waits = [wait for key in self._keys(username, address) if (wait := self._wait(key, now)) is not None]
        return max(1, math.ceil(max(waits))) if waits else None

    def record_failure(self, username: str, address: str | None) -> float:
        """Count one failed sign-in for the username and for the address; returns its time.

        The sign-in page counts every attempt as a failure *before* checking the password, so
        parallel attempts cannot all pass :meth:`retry_after` before any is counted; a correct
        password then takes its attempt back with :meth:`record_success`.
        """
        now = self._clock()
        for key in self._keys(username, address):
            failures = self._failures.get(key)
            if failures is None:
                self._make_room(now)
                failures = deque(maxlen=self._max)
                self._failures[key] = failures
            failures.append(now)
            self._failures.move_to_end(key)
        return now

    def record_success(self, username: str, address: str | None = None, attempt: float | None = None) -> None:
        """Forget the username's failures; the address's stay, except the successful ``attempt`` itself."""
        self._failures.pop(self._keys(username, None)[0], None)
        if address and attempt is not None:
            failures = self._failures.get(f"addr:{address}")
            if failures is not None and attempt in failures:
                failures.remove(attempt)

    def _wait(self, key: str, now: float) -> float | None:
        failures = self._failures.get(key)
        if failures is None:
            return None
        while failures and failures[0] <= now - self._window:
            failures.popleft()
        if not failures:
            del self._failures[key]
            return None
        if len(failures) < self._max:
            return None
        return failures[0] + self._window - now

    def _make_room(self, now: float) -> None:
        if len(self._failures) < MAX_TRACKED_KEYS:
            return
        for key in [k for k, f in self._failures.items() if not f or f[-1] <= now - self._window]:
            del self._failures[key]
        while len(self._failures) >= MAX_TRACKED_KEYS:
            self._failures.popitem(last=False)

    def __len__(self) -> int:
        """Keys currently tracked."""
        return len(self._failures)


def address_key(host: str | None) -> str:
    """The key a client address is limited under: the address itself, or for IPv6 its /64 network.

    One IPv6 host usually holds a whole /64 (RFC 6177; SLAAC privacy addresses, RFC 8981), so a
    per-address limit keyed on full IPv6 addresses would limit nothing. Unparsable hosts (a Unix
    socket, a test client's name) are used as they are; no host is ``""``.
    """
    if not host:
        return ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{address}/64", strict=False))
    return str(address)


class AddressLimit:
    """At most ``limit`` requests per client address (:func:`address_key`) in a sliding window.

    In-process and bounded like :class:`LoginThrottle` (at most :data:`MAX_TRACKED_KEYS` addresses).

    Args:
        limit: requests admitted per address within the window (≥ 1).
        window_seconds: the window's length (> 0).
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, limit: int, window_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._counts = LoginThrottle(limit, window_seconds, clock=clock)

    def admit(self, host: str | None) -> int | None:
        """Count a request from ``host`` and return None, or refuse it (not counted): whole seconds to wait."""
        key = address_key(host)
        wait = self._counts.retry_after(key, None)
        if wait is None:
            self._counts.record_failure(key, None)  # the underlying counter counts "failures": here, requests
        return wait
