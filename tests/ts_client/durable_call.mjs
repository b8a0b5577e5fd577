// The official TypeScript MCP client (@modelcontextprotocol/sdk, pinned in
// package.json beside this file) making one long tool call for
// tests/e2e/test_e2e_durable.py, and printing what it sees, one JSON line each:
//   {"kind": "http", ...}      every HTTP answer (status, X-Served-By, the Last-Event-ID it sent)
//   {"kind": "progress", ...}  every progress notification, in the order the client got them
//   {"kind": "asked", ...}     the question; it is answered once a line arrives on standard input
//   {"kind": "result", ...}    the call's result, then the process exits 0
//   {"kind": "error", ...}     the call failed (exit 1); "transport-error": what the transport reported
// node durable_call.mjs URL TOOL ARGUMENTS_JSON NAME
import { createInterface } from "node:readline";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, tool, argumentsJson, name] = process.argv.slice(2);
const say = (line) => process.stdout.write(JSON.stringify(line) + "\n");
const started = Date.now();

const lines = createInterface({ input: process.stdin });
const released = new Promise((resolve) => lines.once("line", resolve));

async function recordingFetch(input, init) {
  const headers = new Headers(init?.headers);
  let rpc = null;
  if (typeof init?.body === "string") {
    try { rpc = JSON.parse(init.body).method ?? "response"; } catch { rpc = null; }
  }
  const sent = { method: init?.method ?? "GET", rpc, lastEventId: headers.get("last-event-id") };
  try {
    const response = await fetch(input, init);
    say({ kind: "http", ...sent, status: response.status, servedBy: response.headers.get("x-served-by"),
          contentType: response.headers.get("content-type"), at: Date.now() - started });
    return response;
  } catch (error) {
    say({ kind: "http", ...sent, status: null, error: String(error?.cause ?? error), at: Date.now() - started });
    throw error;
  }
}

const transport = new StreamableHTTPClientTransport(new URL(url), { fetch: recordingFetch });
transport.onerror = (error) => say({ kind: "transport-error", message: String(error), at: Date.now() - started });
const client = new Client({ name: "durable-e2e-ts", version: "1.0" }, { capabilities: { elicitation: { form: {} } } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  say({ kind: "asked", message: request.params.message, at: Date.now() - started });
  await released;
  return { action: "accept", content: { name } };
});

try {
  await client.connect(transport);
  say({ kind: "connected", protocolVersion: transport.protocolVersion ?? null, sessionId: transport.sessionId });
  const result = await client.callTool({ name: tool, arguments: JSON.parse(argumentsJson) }, undefined, {
    timeout: 120000,
    resetTimeoutOnProgress: true,
    onprogress: (p) => say({ kind: "progress", progress: p.progress, total: p.total, message: p.message,
                             at: Date.now() - started }),
    onresumptiontoken: (token) => say({ kind: "event-id", id: token }),
  });
  say({ kind: "result", result });
  await transport.close();
  process.exit(0);
} catch (error) {
  say({ kind: "error", message: String(error), at: Date.now() - started });
  process.exit(1);
}
