"""The 2026-07-28 multi round-trip fixtures (``InputRequiredResult``, SEP-2322).

Each fixture is a flow run by :func:`conformance_fixture.dialog.converse`. Flows never ask for an
input whose client capability is missing (-32021 instead), re-ask when an expected response is
absent, and ignore responses they did not ask for. ``requestState`` is plain text here: the SDK's
request-state boundary seals it on the way out and rejects a tampered echo before the flow runs.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.types import InputRequest, InputRequiredResult, TextContent

from conformance_fixture.common import CapabilityName, declared, missing_capability
from conformance_fixture.dialog import Round, converse, form, list_roots, sample

ToolOutcome = str | InputRequiredResult

NAME_FIELD = {"name": {"type": "string", "description": "Your name"}}
CONFIRM_FIELD = {"ok": {"type": "boolean", "description": "Confirm"}}


def _require(current: Round, *names: CapabilityName) -> None:
    missing: list[CapabilityName] = [name for name in names if not declared(current.capabilities, name)]
    if missing:
        raise missing_capability(*missing, reason=f"this fixture needs the client capabilities {missing}")


def elicitation_flow(current: Round) -> str | InputRequiredResult:
    """One elicitation under the fixed key ``user_name``."""
    _require(current, "elicitation")
    answer = current.elicited("user_name")
    if answer is None:
        return InputRequiredResult(input_requests={"user_name": form("What is your name?", NAME_FIELD)})
    name = (answer.content or {}).get("name") if answer.action == "accept" else None
    return f"Hello, {name}!" if name else f"No name given (action={answer.action})."


def sampling_flow(current: Round) -> str | InputRequiredResult:
    """One sampling request."""
    _require(current, "sampling")
    text = current.sampled_text("capital")
    if text is None:
        return InputRequiredResult(input_requests={"capital": sample("What is the capital of France?")})
    return f"The model answered: {text}"


def list_roots_flow(current: Round) -> str | InputRequiredResult:
    """One roots/list request."""
    _require(current, "roots")
    roots = current.roots("roots")
    if roots is None:
        return InputRequiredResult(input_requests={"roots": list_roots()})
    return f"The client has {len(roots.roots)} root(s): " + ", ".join(str(root.uri) for root in roots.roots)


REQUEST_STATE_TOKEN = "confirm-round-1"


def request_state_flow(current: Round) -> str | InputRequiredResult:
    """Completes only when the confirmation arrives together with the state minted in round one."""
    _require(current, "elicitation")
    if current.elicited("confirm") is not None and current.state == REQUEST_STATE_TOKEN:
        return "state-ok: the echoed requestState was verified"
    return InputRequiredResult(
        input_requests={"confirm": form("Please confirm", CONFIRM_FIELD, required=["ok"])},
        request_state=REQUEST_STATE_TOKEN,
    )


def multiple_inputs_flow(current: Round) -> str | InputRequiredResult:
    """Elicitation, sampling and roots in one InputRequiredResult."""
    _require(current, "elicitation", "sampling", "roots")
    wanted: dict[str, InputRequest] = {
        "name": form("What is your name?", NAME_FIELD),
        "greeting": sample("Write a one-line greeting."),
        "roots": list_roots(),
    }
    if wanted.keys() <= current.responses.keys():
        return f"All {len(wanted)} inputs received."
    return InputRequiredResult(input_requests=wanted, request_state="awaiting-three-inputs")


def multi_round_flow(current: Round) -> str | InputRequiredResult:
    """Three rounds: name, then colour, then the answer; the state records progress."""
    _require(current, "elicitation")
    state = json.loads(current.state) if current.state else {}
    name_answer = current.elicited("name")
    if state.get("step") == 2 and (colour_answer := current.elicited("colour")) is not None:
        colour = (colour_answer.content or {}).get("colour", "?")
        return f"{state.get('name', '?')} likes {colour}."
    if state.get("step") == 1 and name_answer is not None:
        name = (name_answer.content or {}).get("name", "?")
        return InputRequiredResult(
            input_requests={"colour": form("What is your favourite colour?", {"colour": {"type": "string"}})},
            request_state=json.dumps({"step": 2, "name": name}),
        )
    return InputRequiredResult(
        input_requests={"name": form("What is your name?", NAME_FIELD)},
        request_state=json.dumps({"step": 1}),
    )


def tampered_state_flow(current: Round) -> str | InputRequiredResult:
    """Round two succeeds with a genuine state; a tampered echo never reaches this flow (the SDK rejects it)."""
    _require(current, "elicitation")
    if current.state is not None:
        return f"state-ok: {current.state}"
    return InputRequiredResult(
        input_requests={"confirm": form("Please confirm", CONFIRM_FIELD, required=["ok"])},
        request_state="tamper-probe",
    )


def capabilities_flow(current: Round) -> str | InputRequiredResult:
    """Asks only for what the client declared: sampling and/or elicitation."""
    wanted: dict[str, InputRequest] = {}
    if declared(current.capabilities, "sampling") and current.sampled_text("sample") is None:
        wanted["sample"] = sample("Say hello.")
    if declared(current.capabilities, "elicitation") and current.elicited("ask") is None:
        wanted["ask"] = form("What is your name?", NAME_FIELD)
    if wanted:
        return InputRequiredResult(input_requests=wanted)
    if current.responses:
        return "Every declared capability answered."
    raise missing_capability("sampling", "elicitation", reason="declare sampling or elicitation")


def prompt_flow(current: Round) -> list[Message] | InputRequiredResult:
    """prompts/get asking the user for context first."""
    _require(current, "elicitation")
    answer = current.elicited("context")
    if answer is None:
        question = form("Which context should the prompt use?", {"context": {"type": "string"}}, required=["context"])
        return InputRequiredResult(input_requests={"context": question})
    text = (answer.content or {}).get("context", "none")
    return [UserMessage(content=TextContent(type="text", text=f"Answer using this context: {text}"))]


TOOL_FLOWS = {
    "test_input_required_result_elicitation": elicitation_flow,
    "test_input_required_result_sampling": sampling_flow,
    "test_input_required_result_list_roots": list_roots_flow,
    "test_input_required_result_request_state": request_state_flow,
    "test_input_required_result_multiple_inputs": multiple_inputs_flow,
    "test_input_required_result_multi_round": multi_round_flow,
    "test_input_required_result_tampered_state": tampered_state_flow,
    "test_input_required_result_capabilities": capabilities_flow,
}


def register(server: MCPServer) -> None:
    """Register the ``test_input_required_result_*`` tools and prompt on ``server``."""
    for name, flow in TOOL_FLOWS.items():
        server.add_tool(_tool_for(name, flow), name=name, description=(flow.__doc__ or name).strip())

    @server.prompt(description="Asks for context through an InputRequiredResult before rendering (SEP-2322).")
    async def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
        return await converse(ctx, prompt_flow)


def _tool_for(
    name: str, flow: Callable[[Round], str | InputRequiredResult]
) -> Callable[[Context], Awaitable[ToolOutcome]]:
    """A tool function running ``flow``; named after the tool so its generated schemas are too."""

    async def run_flow(ctx: Context) -> ToolOutcome:
        return await converse(ctx, flow)

    run_flow.__name__ = run_flow.__qualname__ = name
    return run_flow
