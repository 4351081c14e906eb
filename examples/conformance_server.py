"""hivegate's MCP conformance fixture agent.

``server`` is an official-SDK ``MCPServer`` (mcp 2.3.0) named ``hivegate-conformance`` that offers
every tool, resource, resource template, prompt and completion that the official conformance suite
(``@modelcontextprotocol/conformance@0.2.0-alpha.12``, ``--suite all``) calls on both wires,
``--spec-version 2025-11-25`` (handshake era) and ``--spec-version 2026-07-28`` (stateless era):

* content tools (``test_simple_text``, image, audio, embedded resource, mixed content, errors,
  ``json_schema_2020_12_tool``, ``test_header_region`` with ``x-mcp-header``);
* streaming and client-input tools (logging, progress, sampling, elicitation incl. SEP-1034 and
  SEP-1330, ``test_reconnection``, ``test_streaming_elicitation``, ``test_logging_tool``,
  ``test_missing_capability``, ``test_trigger_tool_change``, ``test_trigger_prompt_change``);
* the ``test_input_required_result_*`` multi round-trip tools and ``test_input_required_result_prompt``;
* resources ``test://static-text``, ``test://static-binary``, ``test://watched-resource`` and the
  template ``test://template/{id}/data``, the plain fixture prompts and a completion handler;
* legacy-only ``logging/setLevel`` and ``resources/subscribe|unsubscribe``;
* SEP-2549 cache hints on the six cacheable methods.

The pieces live in the ``conformance_fixture`` package next to this file. Importing this module
only builds ``server``; hivegate serves it as an in-process backend
(``backend = { type = "python", server = "conformance_server:server" }``). To run it standalone
(SSE mode, loopback only)::

    python examples/conformance_server.py --port 3001 [--resumable]
    scripts/conformance.sh http://127.0.0.1:3001/mcp conformance-out

The standalone server uses uvicorn's h11 parser: httptools (picked by default with
``uvicorn[standard]``) leaves trailing whitespace in header values, so an ``Mcp-Name: "  x  "``
header would not match the body (conformance check sep-2243-server-accepts-whitespace-header-value).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mcp.server.mcpserver import MCPServer

from conformance_fixture import build_server

server: MCPServer = build_server()


def main(argv: Sequence[str] | None = None) -> None:
    """Serve ``server`` over Streamable HTTP at ``http://HOST:PORT/mcp``."""
    import uvicorn

    from conformance_fixture.event_store import MemoryEventStore

    parser = argparse.ArgumentParser(description="Serve the hivegate conformance fixture over Streamable HTTP.")
    parser.add_argument("--host", default="127.0.0.1", help="bind address (keep it on loopback)")
    parser.add_argument("--port", type=int, default=3001)
    parser.add_argument("--json-response", action="store_true", help="JSON responses instead of SSE")
    parser.add_argument(
        "--resumable", action="store_true", help="keep SSE events in memory so legacy streams can be resumed"
    )
    parser.add_argument(
        "--http",
        default="h11",
        choices=["h11", "httptools"],
        help="uvicorn HTTP parser; httptools keeps trailing whitespace in header values (RFC 9110 5.5)",
    )
    args = parser.parse_args(argv)
    app = server.streamable_http_app(
        json_response=args.json_response,
        host=args.host,
        event_store=MemoryEventStore() if args.resumable else None,
        retry_interval=100 if args.resumable else None,
    )
    uvicorn.run(app, host=args.host, port=args.port, http=args.http, log_level="warning")


if __name__ == "__main__":
    main()
