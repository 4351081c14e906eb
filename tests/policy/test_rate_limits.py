"""Rate limits per credential × agent (issue 10 item 4): the token bucket, the limit's precedence, bounded memory."""

from __future__ import annotations

import pytest

from hivegate.agents.model import AgentSpec
from hivegate.auth.principal import ANONYMOUS, CredentialKind, Principal
from hivegate.errors import RateLimitedError
from hivegate.policy.rate_limits import MemoryRateLimiter, RateLimits, credential_key
from hivegate.settings import RateLimitSettings


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def key(credential_id: str, kind: CredentialKind = CredentialKind.USER_KEY) -> Principal:
    return Principal(kind=kind, user_id="u1", username="alice", credential_id=credential_id, agents=None)


def spec(agent_id: str = "echo", per_minute: int | None = None) -> AgentSpec:
    return AgentSpec(id=agent_id, name=agent_id, owner="alice", rate_limit_per_minute=per_minute)


def limits(clock: Clock, **settings: object) -> RateLimits:
    chosen = RateLimitSettings.model_validate(settings)
    return RateLimits(chosen, MemoryRateLimiter(chosen.max_buckets, clock))


async def test_the_61st_call_in_a_minute_is_refused_with_a_retry_after() -> None:
    clock = Clock()
    rate = limits(clock)
    for _ in range(60):
        await rate.check(key("k1"), spec())
    with pytest.raises(RateLimitedError) as refused:
        await rate.check(key("k1"), spec())
    assert refused.value.code == "rate_limited"
    assert refused.value.data == {"code": "rate_limited", "retryAfterSeconds": 1, "limit": 60}
    assert refused.value.headers["Retry-After"] == "1"
    clock.now += 1.0  # one token back (60 per minute)
    await rate.check(key("k1"), spec())
    with pytest.raises(RateLimitedError):
        await rate.check(key("k1"), spec())


async def test_buckets_are_per_credential_and_per_agent() -> None:
    clock = Clock()
    rate = limits(clock, calls_per_minute=2)
    for _ in range(2):
        await rate.check(key("k1"), spec("a"))
    with pytest.raises(RateLimitedError):
        await rate.check(key("k1"), spec("a"))
    for _ in range(2):  # another key on the same agent, and the same key on another agent: full buckets
        await rate.check(key("k2"), spec("a"))
        await rate.check(key("k1"), spec("b"))


async def test_a_refused_call_takes_nothing_and_retry_after_counts_the_wait() -> None:
    clock = Clock()
    rate = limits(clock, calls_per_minute=2)  # a token every 30 s
    await rate.check(key("k1"), spec())
    await rate.check(key("k1"), spec())
    for _ in range(5):
        with pytest.raises(RateLimitedError) as refused:
            await rate.check(key("k1"), spec())
        assert refused.value.retry_after_seconds == 30
    clock.now += 29.5
    with pytest.raises(RateLimitedError) as refused:
        await rate.check(key("k1"), spec())
    assert refused.value.retry_after_seconds == 1
    clock.now += 0.5
    await rate.check(key("k1"), spec())


async def test_agent_limit_beats_key_limit_beats_default() -> None:
    clock = Clock()
    rate = limits(clock, calls_per_minute=50, per_key={"k-vip": 7})
    assert rate.limit_for(key("k1"), spec()) == 50
    assert rate.limit_for(key("k-vip"), spec()) == 7
    assert rate.limit_for(key("k-vip"), spec(per_minute=3)) == 3
    oauth = Principal(kind=CredentialKind.OAUTH, user_id="u1", username="alice", credential_id="k-vip", grant_id="g1")
    assert rate.limit_for(oauth, spec()) == 50  # per_key names API keys only
    for _ in range(3):
        await rate.check(key("k-vip"), spec(per_minute=3))
    with pytest.raises(RateLimitedError) as refused:
        await rate.check(key("k-vip"), spec(per_minute=3))
    assert refused.value.data["limit"] == 3


async def test_oauth_tokens_of_one_grant_share_a_bucket_and_anonymous_is_not_limited() -> None:
    clock = Clock()
    rate = limits(clock, calls_per_minute=1)
    first = Principal(kind=CredentialKind.OAUTH, user_id="u1", credential_id="jti-1", grant_id="g1")
    refreshed = Principal(kind=CredentialKind.OAUTH, user_id="u1", credential_id="jti-2", grant_id="g1")
    await rate.check(first, spec())
    with pytest.raises(RateLimitedError):
        await rate.check(refreshed, spec())
    assert credential_key(ANONYMOUS) is None
    for _ in range(10):
        await rate.check(ANONYMOUS, spec())


async def test_disabled_limits_refuse_nothing() -> None:
    rate = limits(Clock(), enabled=False, calls_per_minute=1)
    for _ in range(10):
        await rate.check(key("k1"), spec())


async def test_the_bucket_map_is_bounded() -> None:
    """An attacker rotating credentials cannot grow memory: the least recently used bucket goes first."""
    clock = Clock()
    limiter = MemoryRateLimiter(1000, clock)
    for index in range(5000):
        await limiter.take(f"key:{index}|echo", 1.0, 60)
    assert len(limiter) == 1000
    await limiter.take("key:4999|echo", 1.0, 60)
    assert len(limiter) == 1000
