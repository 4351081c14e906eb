// The A2A JavaScript SDK's client (@a2a-js/sdk) against one agent, from its card URL alone.
//
//   node a2a_js_client.mjs A2A_JS_DIR CARD_URL BEARER_KEY TEXT [JSONRPC|HTTP+JSON]
//
// A2A_JS_DIR is where scripts/install-tools.sh installed the SDK (.tools/a2a-js). Fetches the card, sends TEXT
// (SendMessage, blocking) and streams it (SendStreamingMessage), over the card's interface of the binding named
// (JSONRPC unless told), every request carrying `Authorization: Bearer BEARER_KEY`. Prints one JSON object on stdout: the card's name and interfaces,
// the sent task's state and artifact text, the stream's event kinds, its final state and its whole-reply text.
// Exits non-zero (the error on stderr) if anything fails. tests/e2e/test_a2a_js.py runs it.

import { pathToFileURL } from "node:url";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

const [sdkDir, cardUrl, key, text, binding = "JSONRPC"] = process.argv.slice(2);
if (!sdkDir || !cardUrl || !key || text === undefined) {
    console.error("usage: node a2a_js_client.mjs A2A_JS_DIR CARD_URL BEARER_KEY TEXT [JSONRPC|HTTP+JSON]");
    process.exit(2);
}
const pkg = join(sdkDir, "node_modules", "@a2a-js", "sdk", "dist");
const { Role, TaskState } = await import(pathToFileURL(join(pkg, "index.js")).href);
const { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } = await import(
    pathToFileURL(join(pkg, "client", "index.js")).href
);

const authorized = (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("Authorization", `Bearer ${key}`);
    return fetch(input, { ...init, headers });
};

const message = () => ({
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "text/plain" }],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
});
const request = () => ({ tenant: "", message: message(), configuration: undefined, metadata: undefined });
const partsText = (parts) => parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
const stateName = (state) => TaskState[state] ?? String(state);

// The card URL is the whole URL: an empty path makes the resolver fetch it as given.
const resolver = new DefaultAgentCardResolver({ fetchImpl: authorized });
const card = await resolver.resolve(cardUrl, "");
// One transport only: the client must use the binding asked for, or fail.
const transport =
    binding === "HTTP+JSON"
        ? new RestTransportFactory({ fetchImpl: authorized })
        : new JsonRpcTransportFactory({ fetchImpl: authorized });
const factory = new ClientFactory({ transports: [transport], cardResolver: resolver });
const client = await factory.createFromUrl(cardUrl, "");

const sent = await client.sendMessage(request(), { signal: AbortSignal.timeout(30000) });
const sentKind = "status" in sent ? "task" : "message";
const sentResult =
    sentKind === "task"
        ? {
              kind: "task",
              state: stateName(sent.status?.state),
              text: sent.artifacts.map((a) => partsText(a.parts)).join(""),
          }
        : { kind: "message", text: partsText(sent.parts) };

const kinds = [];
let lastState = "";
let wholeReply = "";
for await (const event of client.sendMessageStream(request(), { signal: AbortSignal.timeout(30000) })) {
    const payload = event.payload;
    kinds.push(payload?.$case ?? "none");
    if (payload?.$case === "statusUpdate") lastState = stateName(payload.value.status?.state);
    if (payload?.$case === "task") lastState = stateName(payload.value.status?.state);
    if (payload?.$case === "artifactUpdate" && payload.value.lastChunk) wholeReply = partsText(payload.value.artifact.parts);
    if (payload?.$case === "message") wholeReply = partsText(payload.value.parts);
}

console.log(
    JSON.stringify({
        binding: client.transport?.protocolName ?? binding,
        card: {
            name: card.name,
            interfaces: card.supportedInterfaces.map((i) => [i.protocolBinding, i.url, i.protocolVersion]),
        },
        send: sentResult,
        stream: { kinds, state: lastState, text: wholeReply },
    }),
);
