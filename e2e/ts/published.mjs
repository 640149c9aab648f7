// Drives published MCP servers (server-filesystem, server-memory) through toolgate
// with the official TypeScript SDK. Run by the Go test TestPublishedServersBehindToolgate.
// Usage: node published.mjs <url> <api-key> <plan-json>
//   plan-json: [{"tool": name, "arguments": {...}}, ...], called in order on one session.
// Prints one JSON line:
//   {"tools":[{name, readOnlyHint, destructiveHint}],
//    "calls":[{name, isError, structuredContent, text}]}
// The SDK validates structuredContent against each tool's outputSchema, so a call
// whose envelope does not match what toolgate advertised throws, and the script exits 1.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, planJSON] = process.argv.slice(2);
const plan = JSON.parse(planJSON);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "toolgate-e2e-published", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const calls = [];
for (const step of plan) {
  const res = await client.callTool({ name: step.tool, arguments: step.arguments });
  const text = (res.content ?? []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  calls.push({ name: step.tool, isError: res.isError ?? false, structuredContent: res.structuredContent, text });
}
console.log(JSON.stringify({
  tools: tools.map((t) => ({
    name: t.name,
    readOnlyHint: t.annotations?.readOnlyHint ?? null,
    destructiveHint: t.annotations?.destructiveHint ?? null,
  })),
  calls,
}));
await client.close();
