"""The sign-in throttle on its own, with a fake clock (no sleeps): sliding window, per username and per address."""

from __future__ import annotations

import pytest

from hivegate.auth.oauth import throttle as throttle_module
from hivegate.auth.oauth.throttle import AddressLimit, LoginThrottle, address_key


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_throttles_after_max_failures_until_the_oldest_ages_out() -> None:
    clock = FakeClock()
    throttle = LoginThrottle(3, 300, clock=clock)
    for step in range(3):
        assert throttle.retry_after("alice", "10.0.0.1") is None
        throttle.record_failure("alice", "10.0.0.1")
        clock.now += 10 * (step + 1)  # failures at 1000, 1010, 1030
    assert clock.now == 1060
    assert throttle.retry_after("alice", "10.0.0.2") == 240  # the first failure leaves the window at 1300
    clock.now = 1299.5
    assert throttle.retry_after("Alice", None) == 1  # rounded up, never 0
    clock.now = 1300
    assert throttle.retry_after("alice", "10.0.0.2") is None  # sliding: two failures left in the window
    throttle.record_failure("alice", "10.0.0.2")
    assert throttle.retry_after("alice", None) == 10  # now the 1010 failure is the oldest


def test_username_compares_ignoring_case_and_surrounding_space() -> None:
    throttle = LoginThrottle(2, 60, clock=FakeClock())
    throttle.record_failure("Alice", None)
    throttle.record_failure(" ALICE ", None)
    assert throttle.retry_after("alice", None) is not None


def test_address_is_throttled_across_usernames() -> None:
    throttle = LoginThrottle(2, 60, clock=FakeClock())
    throttle.record_failure("a", "192.0.2.1")
    throttle.record_failure("b", "192.0.2.1")
    assert throttle.retry_after("c", "192.0.2.1") is not None
    assert throttle.retry_after("c", "192.0.2.2") is None


def test_success_clears_the_username_but_not_the_address() -> None:
    throttle = LoginThrottle(2, 60, clock=FakeClock())
    throttle.record_failure("alice", "192.0.2.1")
    throttle.record_failure("alice", "192.0.2.1")
    throttle.record_success("alice")
    assert throttle.retry_after("alice", None) is None
    assert throttle.retry_after("alice", "192.0.2.1") is not None


def test_memory_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throttle_module, "MAX_TRACKED_KEYS", 10)
    clock = FakeClock()
    throttle = LoginThrottle(1, 60, clock=clock)
    for index in range(50):
        throttle.record_failure(f"user{index}", None)
    assert len(throttle) <= 10
    assert throttle.retry_after("user49", None) is not None  # the newest are kept
    clock.now += 61
    throttle.record_failure("late", None)  # aged-out keys are dropped first
    assert len(throttle) == 1


def test_rejects_nonsense_configuration() -> None:
    with pytest.raises(ValueError, match="max_failures"):
        LoginThrottle(0, 60)
    with pytest.raises(ValueError, match="window_seconds"):
        LoginThrottle(1, 0)


# -- the per-address request limit (/oauth/authorize) ------------------------------------------


def test_address_limit_admits_limit_requests_per_window() -> None:
    """Issue 7 item 4: ``/oauth/authorize`` is limited per address; refusals are not counted."""
    clock = FakeClock()
    limit = AddressLimit(3, 60, clock=clock)
    for _ in range(3):
        assert limit.admit("192.0.2.7") is None
        clock.now += 1
    assert limit.admit("192.0.2.7") == 57  # the first request leaves the window at 1060
    assert limit.admit("192.0.2.8") is None  # another address is unaffected
    clock.now = 1060
    assert limit.admit("192.0.2.7") is None


@pytest.mark.parametrize(
    ("host", "key"),
    [
        ("192.0.2.7", "192.0.2.7"),
        ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
        ("2001:DB8:1:2:bbbb::9", "2001:db8:1:2::/64"),
        ("::ffff:192.0.2.7", "192.0.2.7"),
        ("testclient", "testclient"),
        (None, ""),
    ],
)
def test_address_key_groups_an_ipv6_host_by_its_64(host: str | None, key: str) -> None:
    assert address_key(host) == key


def test_one_ipv6_host_cannot_escape_the_limit_by_changing_addresses() -> None:
    limit = AddressLimit(2, 60, clock=FakeClock())
    assert limit.admit("2001:db8::1") is None
    assert limit.admit("2001:db8::2") is None
    assert limit.admit("2001:db8::3") is not None
    assert limit.admit("2001:db8:0:1::1") is None  # the next /64 is another host
