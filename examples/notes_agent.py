"""The ``notes`` demo agent: the notes server of the resources-and-prompts guide, on the official SDK.

hivegate serves it at ``/notes/mcp``: its template ``note://{note_id}``, prompt
``summarize_note`` and completions become the agent's own. Cache hints come from the
agent's ``cache`` policy in ``hivegate.toml`` (60000 ms, private, on reads).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp_types import Completion, CompletionArgument, CompletionContext, PromptReference, ResourceTemplateReference

NOTES = {
    "7": "Buy flour, eggs, and milk. Pick up the bike from the shop on Friday.",
    "12": "Lab report due Monday. Ask Sam for the titration data first.",
    "15": "Call the dentist to move the cleaning to next week.",
}
STYLES = ("bullets", "sentence")

server = MCPServer("notes", version="1.0.0")


@server.resource("note://{note_id}", mime_type="text/plain")
def read_note(note_id: str) -> str:
    """One note's text, by its numeric id."""
    if note_id not in NOTES:
        raise ResourceNotFoundError(f"No note with id {note_id}")
    return NOTES[note_id]


@server.prompt()
def summarize_note(note_id: str, style: str = "bullets") -> str:
    """Summarize one note in the chosen style (bullets or sentence)."""
    return f"Summarize note {note_id} as {style}. The note says:\n\n{NOTES.get(note_id, '(missing)')}"


@server.completion()
async def complete(
    ref: PromptReference | ResourceTemplateReference,
    argument: CompletionArgument,
    context: CompletionContext | None,
) -> Completion | None:
    """Suggest note ids (prompt argument and template variable) and summary styles."""
    if argument.name == "note_id":
        matches = sorted(k for k in NOTES if k.startswith(argument.value))
        return Completion(values=matches, total=len(matches), has_more=False)
    if argument.name == "style":
        return Completion(values=[s for s in STYLES if s.startswith(argument.value)])
    return None
