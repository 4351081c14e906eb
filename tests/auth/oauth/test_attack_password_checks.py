"""Concurrent sign-ins verify at most ``security.password_checks_concurrency`` passwords at once (issue 7 item 2).

Found by the attack trial of issue 7: each argon2id verification takes about 64 MiB and a core
for tens of milliseconds, and they ran on anyio's shared worker threads (40). The sign-in throttle
admits ``login_max_failures`` attempts per address at once, so 40 failed sign-ins from 8
addresses (distinct usernames) took the server's RSS from 119 to 1,242 MiB, and 40 such
attempts in flight could reach ~2.6 GiB. A limiter of its own bounds that memory: the other
attempts wait their turn.

The password check here is the real one, made slow (a fixed delay stands for argon2's cost) so
that concurrent attempts overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import anyio
import httpx
import pytest

from hivegate.auth.oauth import server as oauth_server
from tests.auth.oauth.conftest import Browser, OAuthServer, hidden, pkce

ATTEMPTS_PER_ADDRESS = 3  # conftest.MAX_FAILURES: the throttle admits this many at once per address
ADDRESSES = [f"127.0.0.{n}" for n in range(2, 6)]
SLOW_CHECK_SECONDS = 0.3


class _Overlap:
    """Wraps the password check: counts how many run at once."""

    def __init__(self, check: Callable[..., bool]) -> None:
        self._check = check
        self._lock = threading.Lock()
        self.active = 0
        self.most = 0

    def __call__(self, *args: object, **kwargs: object) -> bool:
        with self._lock:
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            time.sleep(SLOW_CHECK_SECONDS)  # argon2id's cost; runs on a worker thread
            return self._check(*args, **kwargs)
        finally:
            with self._lock:
                self.active -= 1


async def test_concurrent_sign_ins_share_a_bounded_number_of_password_checks(
    oauth: OAuthServer, browser: Browser, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 7 item 2: 12 failed sign-ins at once from 4 addresses; at most the configured checks overlap."""
    overlap = _Overlap(oauth_server.verify_password)
    monkeypatch.setattr(oauth_server, "verify_password", overlap)
    limit = oauth.settings.security.password_checks_concurrency
    assert limit < ATTEMPTS_PER_ADDRESS * len(ADDRESSES)
    client = await browser.register()
    request_id = await browser.start(client["client_id"], pkce()[1])
    statuses: list[int] = []

    async def attempt(address: str, index: int) -> None:
        transport = httpx.AsyncHTTPTransport(local_address=address)
        async with httpx.AsyncClient(base_url=oauth.base, transport=transport, timeout=60) as http:
            page = await http.get("/oauth/login", params={"request": request_id})
            form = {
                "request": request_id,
                "csrf": hidden(page.text, "csrf"),
                "username": f"{address}-{index}",
                "password": "x",
            }
            statuses.append((await http.post("/oauth/login", data=form)).status_code)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            for address in ADDRESSES:
                for index in range(ATTEMPTS_PER_ADDRESS):
                    group.start_soon(attempt, address, index)
    assert statuses == [401] * (ATTEMPTS_PER_ADDRESS * len(ADDRESSES))
    assert 1 <= overlap.most <= limit, overlap.most
