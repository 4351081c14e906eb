"""The invocation layer: one call of an agent, whatever plane it came in on (MCP now, A2A and REST next).

:func:`~hivegate.calls.invoke.invoke` runs the agent's backend on one
:class:`~hivegate.backends.base.Invocation` under the agent's ``invoke_timeout_seconds`` and reports reply
deltas to a sink and one terminal event (:mod:`hivegate.calls.events`); :mod:`hivegate.calls.cancel`
cancels a call whose client went away or sent ``notifications/cancelled`` on a path the SDK does not run.
This package imports nothing from :mod:`hivegate.mcp`: each plane adapts the events to its wire.
"""
