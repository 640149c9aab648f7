// Lists and calls tools through toolgate with the official TypeScript SDK.
// Usage: node client.mjs <url> <api-key> <tool> <json-args> [<tool> <json-args> ...]
// Prints one JSON line: {"tools":[names], "calls":[{name, isError, structuredContent}]}.
// The SDK validates structuredContent against each tool's outputSchema, so a
// call that returns succeeds only if toolgate's envelope matches what it advertised.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key, ...pairs] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${key}` } },
});
const client = new Client({ name: "toolgate-e2e-ts", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const calls = [];
for (let i = 0; i < pairs.length; i += 2) {
  const res = await client.callTool({ name: pairs[i], arguments: JSON.parse(pairs[i + 1]) });
  calls.push({ name: pairs[i], isError: res.isError ?? false, structuredContent: res.structuredContent });
}
console.log(JSON.stringify({ tools: tools.map((t) => t.name), calls }));
await client.close();
