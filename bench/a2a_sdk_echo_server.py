"""The A2A baseline for ``bench/run.py``: a bare a2a-sdk Starlette server with one echo agent.

``python bench/a2a_sdk_echo_server.py PORT`` serves the agent ``echo`` the way the a2a-sdk's own
example does (``/work/shared`` reference §2.9): its card at ``/echo/.well-known/agent-card.json`` and
the JSON-RPC binding at ``POST /echo/a2a``, built with ``create_agent_card_routes`` and
``create_jsonrpc_routes`` over a ``DefaultRequestHandler`` with the SDK's ``InMemoryTaskStore`` (which
keeps every task: it grows with every request). No authentication. On uvicorn with uvloop and
httptools, no access log: the stack hivegate runs on, with nothing of hivegate's. Port 0 picks a free
port; the server prints ``a2a-sdk listening on URL`` once it accepts connections.

The executor does what hivegate's does for the demo echo agent (``examples/echo_agent.py`` through
``hivegate.a2a.executor``): the task, WORKING, one ``response`` artifact chunk per word of the
message, the whole reply replacing the chunks (``lastChunk``), COMPLETED.
"""

from __future__ import annotations

import sys

import uvicorn
import uvloop
from a2a.helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette
from starlette.routing import Mount

from ready_server import serve

AGENT = "echo"


class EchoExecutor(AgentExecutor):
    """The echo agent's reply, streamed word by word into the ``response`` artifact, then whole."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(message)
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        text = context.get_user_input()
        artifact_id = f"{task.id}-response"
        words = text.split(" ")
        for index, word in enumerate(words):
            chunk = word if index == len(words) - 1 else word + " "
            await updater.add_artifact([Part(text=chunk)], artifact_id=artifact_id, name="response", append=index > 0)
        await updater.add_artifact([Part(text=text)], artifact_id=artifact_id, name="response", last_chunk=True)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def app(base_url: str) -> Starlette:
    card = AgentCard(
        name="Echo",
        description="Replies with the message it receives.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base_url}/{AGENT}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes its input", tags=["demo"])],
    )
    handler = DefaultRequestHandler(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, rpc_url="/a2a")
    return Starlette(routes=[Mount(f"/{AGENT}", routes=routes)])


async def _serve(port: int) -> None:
    config = uvicorn.Config(
        # the card's URL names the port asked for; the bench reads the real one from the ready line
        app(f"http://127.0.0.1:{port}"),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    await serve(config, "a2a-sdk")


def main() -> None:
    args = sys.argv[1:]
    uvloop.run(_serve(int(args[0]) if args else 0))


if __name__ == "__main__":
    main()
