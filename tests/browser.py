"""Headless Chromium for tests: ``with chromium_page() as page: ...`` yields a Playwright ``Page``.

The browser is Debian's ``/usr/bin/chromium``, installed by ``scripts/install-tools.sh`` (``make tools``,
which ``make test`` runs); Playwright never downloads a browser of its own here. Each use starts a fresh
Chromium with an empty temporary profile and closes it afterwards.

Without ``/usr/bin/chromium`` the test fails and says how to install it, so CI never skips silently.
A developer who cannot install it (no root) sets ``HIVEGATE_TEST_SKIP_BROWSER=1`` to skip instead.

This is the sync Playwright API: use it from plain (non-async) tests, where no asyncio loop runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Page, sync_playwright

__all__ = ["CHROMIUM_PATH", "SKIP_ENV", "TIMEOUT_MS", "chromium_page", "require_chromium"]

CHROMIUM_PATH = Path("/usr/bin/chromium")
SKIP_ENV = "HIVEGATE_TEST_SKIP_BROWSER"
TIMEOUT_MS = 15_000.0
"""Default timeout of every page action, navigation and ``expect`` that passes it."""
LAUNCH_TIMEOUT_MS = 30_000.0

# No sandbox (we run as root), no GPU, and nothing that reaches out to the network on its own: this
# machine's network is closed, and Chromium's background connections would only be refused.
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def require_chromium() -> None:
    """Fail (or skip, with ``HIVEGATE_TEST_SKIP_BROWSER=1``) when ``/usr/bin/chromium`` is missing."""
    if CHROMIUM_PATH.exists():
        return
    message = f"{CHROMIUM_PATH} is missing: run `make tools` (or `bash scripts/install-tools.sh`) as root to install it"
    if os.environ.get(SKIP_ENV) == "1":
        pytest.skip(f"{message} ({SKIP_ENV}=1 skips the browser tests)")
    pytest.fail(f"{message}, or set {SKIP_ENV}=1 to skip the browser tests", pytrace=False)


@contextmanager
def chromium_page(*, timeout_ms: float = TIMEOUT_MS) -> Generator[Page]:
    """Start headless Chromium with an empty temporary profile, yield a page, close everything afterwards."""
    require_chromium()
    with (
        tempfile.TemporaryDirectory(prefix="hivegate-chromium-") as user_data_dir,
        sync_playwright() as playwright,
    ):
        context = playwright.chromium.launch_persistent_context(
            user_data_dir,
            executable_path=CHROMIUM_PATH,
            headless=True,
            args=list(CHROMIUM_ARGS),
            timeout=LAUNCH_TIMEOUT_MS,
        )
        try:
            context.set_default_timeout(timeout_ms)
            context.set_default_navigation_timeout(timeout_ms)
            page = context.pages[0] if context.pages else context.new_page()
            yield page
        finally:
            context.close()
