"""Shared fixtures: a real hivegate server with the demo agents, and database URLs to test against."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.gateway_process import ROOT, GatewayProcess, run_gateway

POSTGRES_ENV = "HIVEGATE_TEST_POSTGRES_URL"


@pytest.fixture(scope="session")
def demo_gateway() -> Iterator[GatewayProcess]:
    """``examples/hivegate.toml`` served on a free port with an in-memory registry."""
    with run_gateway(ROOT / "examples" / "hivegate.toml") as gateway:
        yield gateway


def postgres_url() -> str | None:
    """The PostgreSQL URL tests may use (``HIVEGATE_TEST_POSTGRES_URL``), or None."""
    return os.environ.get(POSTGRES_ENV) or None
