"""A backend that failed to start is retried by the first request after a back-off (docs/configuration.md §5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hivegate.agents.model import AgentSpec
from hivegate.agents.registry import AgentRegistry
from hivegate.errors import AgentServiceUnavailableError
from hivegate.mcp.host import RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS, AgentHost
from hivegate.settings import load_settings
from hivegate.storage.memory.agents import MemoryAgentStore


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_failed_backend_is_retried_after_the_back_off(tmp_path: Path) -> None:
    """Issue 7 item 16: the first request after the back-off retries the import (and succeeds once it loads);
    requests within it get 503 without an import attempt; repeated failures double the wait, capped."""
    module = f"late_agent_{tmp_path.name.replace('-', '_')}"
    spec = AgentSpec.model_validate(
        {
            "id": "late",
            "name": "Late",
            "owner": "alice",
            "base_dir": str(tmp_path),
            "backend": {"type": "python", "callable": f"{module}:reply"},
        }
    )
    registry = AgentRegistry(MemoryAgentStore())
    await registry.apply([spec])
    clock = FakeClock()
    host = AgentHost(registry, load_settings(), clock=clock)
    async with host.running():
        with pytest.raises(AgentServiceUnavailableError):
            await host.runtime("late")  # no module yet: fails, back-off 1 s
        (tmp_path / f"{module}.py").write_text("def reply(invocation):\n    return 'ok'\n", encoding="utf-8")
        clock.now += RETRY_FIRST_SECONDS / 2
        with pytest.raises(AgentServiceUnavailableError):
            await host.runtime("late")  # within the back-off: still 503, no import attempted
        assert host.cached("late") is None
        clock.now += RETRY_FIRST_SECONDS / 2
        runtime = await host.runtime("late")  # the first request after the back-off loads it
        assert runtime is not None
        assert host.cached("late") is runtime


async def test_repeated_failures_double_the_wait_up_to_the_cap(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 7 item 16: each failed retry doubles the back-off, up to RETRY_MAX_SECONDS (one logged attempt each)."""
    spec = AgentSpec.model_validate(
        {
            "id": "never",
            "name": "Never",
            "owner": "alice",
            "base_dir": str(tmp_path),
            "backend": {"type": "python", "callable": "no_such_module_for_retry_test:reply"},
        }
    )
    registry = AgentRegistry(MemoryAgentStore())
    await registry.apply([spec])
    clock = FakeClock()
    host = AgentHost(registry, load_settings(), clock=clock)

    def attempts() -> int:
        return sum("cannot start agent never" in record.getMessage() for record in caplog.records)

    async with host.running():
        with pytest.raises(AgentServiceUnavailableError):
            await host.runtime("never")
        assert attempts() == 1
        for i in range(8):
            wait = min(RETRY_FIRST_SECONDS * 2**i, RETRY_MAX_SECONDS)
            clock.now += wait - 0.01
            with pytest.raises(AgentServiceUnavailableError):
                await host.runtime("never")
            assert attempts() == i + 1, f"retried before the {wait} s back-off ended"
            clock.now += 0.01
            with pytest.raises(AgentServiceUnavailableError):
                await host.runtime("never")
            assert attempts() == i + 2, f"not retried after the {wait} s back-off"
