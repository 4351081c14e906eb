"""Building blocks of hivegate's MCP conformance fixture (see ``examples/conformance_server.py``).

Each submodule registers one family of fixture capabilities on an ``MCPServer``:

* ``content``: plain tools (text, image, audio, embedded resources, errors, JSON Schema 2020-12,
  ``x-mcp-header``);
* ``notifying``: tools that stream notifications or talk back to the client (logging, progress,
  sampling, elicitation, SSE reconnection, list-changed triggers, capability checks);
* ``input_required``: the 2026-07-28 multi round-trip (``InputRequiredResult``) tools and prompt;
* ``catalog``: resources, the resource template, prompts and the completion handler;
* ``legacy``: the handshake-era-only methods (``logging/setLevel``, ``resources/subscribe``,
  ``resources/unsubscribe``).

``build_server`` assembles all of them; the conformance suite's fixture names are fixed by the
suite, everything else (texts, keys, schemas) is hivegate's own.
"""

from conformance_fixture.server import SERVER_NAME, build_server

__all__ = ["SERVER_NAME", "build_server"]
