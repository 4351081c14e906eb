"""Shared pieces of the fixture: media samples, per-server state and small request helpers.

The image and audio samples are generated here (a 2x2 PNG and a short 8 kHz WAV), so the fixture
carries no opaque blobs.
"""

from __future__ import annotations

import base64
import io
import math
import struct
import warnings
import wave
import zlib
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp.types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ClientCapabilities,
    ElicitationCapability,
    LoggingLevel,
    RootsCapability,
    SamplingCapability,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# --- media ---------------------------------------------------------------------------------------------------


def _png_chunk(kind: bytes, payload: bytes) -> bytes:
    body = kind + payload
    return struct.pack(">I", len(payload)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)


def make_png(width: int = 2, height: int = 2, rgb: tuple[int, int, int] = (0xF5, 0xA6, 0x23)) -> bytes:
    """A solid-colour 8-bit RGB PNG."""
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    row = b"\x00" + bytes(rgb) * width  # filter type 0, then the pixels
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", zlib.compress(row * height))
        + _png_chunk(b"IEND", b"")
    )


def make_wav(frequency_hz: float = 440.0, duration_s: float = 0.01, rate: int = 8000) -> bytes:
    """A mono 16-bit PCM WAV holding a short sine tone."""
    frames = bytearray()
    for i in range(int(rate * duration_s)):
        frames += struct.pack("<h", int(12_000 * math.sin(2 * math.pi * frequency_hz * i / rate)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(bytes(frames))
    return buffer.getvalue()


PNG_BYTES: bytes = make_png()
PNG_BASE64: str = base64.b64encode(PNG_BYTES).decode("ascii")
WAV_BASE64: str = base64.b64encode(make_wav()).decode("ascii")


# --- per-server state ----------------------------------------------------------------------------------------


@dataclass
class FixtureState:
    """Mutable state of one fixture server (never module-global, so two servers never share it)."""

    log_level: LoggingLevel = "debug"
    """Last level set through the legacy ``logging/setLevel`` (recorded; the fixture logs regardless)."""
    subscribed_uris: set[str] = field(default_factory=set[str])
    """URIs subscribed through the legacy ``resources/subscribe``."""
    watched_text: str = "watched resource, revision 0"
    """Current content of ``test://watched-resource``."""


# --- request helpers -----------------------------------------------------------------------------------------


def is_modern(ctx: Context) -> bool:
    """True when the current request speaks the stateless 2026-07-28 protocol."""
    return ctx.protocol_version in MODERN_PROTOCOL_VERSIONS


async def send_log(ctx: Context, level: LoggingLevel, message: str, *, logger: str = "conformance") -> None:
    """Emit a ``notifications/message`` on the current request's stream.

    The SDK applies the era rules (2026-07-28: only when the request's ``_meta`` opted in with a log
    level; legacy: always). Logging is deprecated by SEP-2577, so the SDK warns on every call; the
    fixture exercises it on purpose. The session method is called directly (``Context.log`` would
    warn again inside its own coroutine), and the filter covers only the synchronous call that
    creates the coroutine: no ``await`` happens while it is in place.
    """
    session = ctx.request_context.session
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        pending = session.send_log_message(  # pyright: ignore[reportDeprecated]
            level, message, logger=logger, related_request_id=ctx.request_context.request_id
        )
    await pending


CapabilityName = Literal["sampling", "elicitation", "roots"]

_CAPABILITY_MODELS: dict[CapabilityName, ClientCapabilities] = {
    "sampling": ClientCapabilities(sampling=SamplingCapability()),
    "elicitation": ClientCapabilities(elicitation=ElicitationCapability()),
    "roots": ClientCapabilities(roots=RootsCapability()),
}


def declared(capabilities: ClientCapabilities | None, name: CapabilityName) -> bool:
    """Whether the client declared ``name`` (per request on 2026-07-28, at ``initialize`` on legacy)."""
    return capabilities is not None and getattr(capabilities, name) is not None


def missing_capability(*names: CapabilityName, reason: str) -> MCPError:
    """The -32021 MissingRequiredClientCapability error; ``data.requiredCapabilities`` is an object."""
    required: dict[str, Any] = {}
    for name in names:
        required.update(_CAPABILITY_MODELS[name].model_dump(by_alias=True, exclude_none=True))
    return MCPError(
        code=MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=reason,
        data={"requiredCapabilities": required},
    )
