// Drives toolgate's insufficient_scope challenge with the official TypeScript SDK's own step-up.
// Usage: node stepup.mjs <gateway base URL> <JWT lacking a scope> <JWT granted it> <tool> <json-args>
//
// The gateway's resource is https://gw.test/mcp and its issuer https://idp.test/ (the Go test's
// config); fetch sends https://gw.test/... to the gateway and answers https://idp.test/... itself,
// as a minimal authorization server: its metadata, and a token endpoint that returns the granted JWT.
// The SDK connects with the first token, calls the tool, gets the 403, reads the challenge, fetches the
// protected-resource metadata it names, starts an authorization for the challenge's scopes (the
// authorization URL is recorded), exchanges the code, and the call is repeated with the new token.
// Prints one JSON line: {authorizeScope, authorizeResource, tokenRequest, firstError, retried}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [base, lacking, granted, tool, args] = process.argv.slice(2);
const idp = "https://idp.test";
const json = (v) => new Response(JSON.stringify(v), { status: 200, headers: { "content-type": "application/json" } });
let tokenRequest = null;

async function testFetch(input, init) {
  const url = new URL(typeof input === "string" || input instanceof URL ? input : input.url);
  if (url.origin === "https://gw.test") {
    return fetch(base + url.pathname + url.search, init);
  }
  if (url.origin === idp && url.pathname.startsWith("/.well-known/")) {
    return json({
      issuer: idp + "/", authorization_endpoint: idp + "/authorize", token_endpoint: idp + "/token",
      response_types_supported: ["code"], grant_types_supported: ["authorization_code"],
      code_challenge_methods_supported: ["S256"], token_endpoint_auth_methods_supported: ["none"],
    });
  }
  if (url.origin === idp && url.pathname === "/token") {
    tokenRequest = Object.fromEntries(new URLSearchParams(String(init.body)));
    return json({ access_token: granted, token_type: "Bearer", expires_in: 3600 });
  }
  return new Response("not found", { status: 404 });
}

let tokens = { access_token: lacking, token_type: "Bearer" };
let verifier = "";
let authorizeURL = null;
const provider = {
  get redirectUrl() { return "http://127.0.0.1/callback"; },
  get clientMetadata() { return { client_name: "toolgate-e2e-stepup", redirect_uris: ["http://127.0.0.1/callback"] }; },
  clientInformation: () => ({ client_id: "e2e-client" }),
  tokens: () => tokens,
  saveTokens: (t) => { tokens = t; },
  redirectToAuthorization: (u) => { authorizeURL = u; },
  saveCodeVerifier: (v) => { verifier = v; },
  codeVerifier: () => verifier,
};

const transport = new StreamableHTTPClientTransport(new URL("https://gw.test/mcp"), { authProvider: provider, fetch: testFetch });
const client = new Client({ name: "toolgate-e2e-stepup", version: "1.0.0" });
await client.connect(transport);
let firstError = "";
try {
  await client.callTool({ name: tool, arguments: JSON.parse(args) });
  firstError = "none: the call ran with the token lacking the scope";
} catch (e) {
  firstError = e instanceof UnauthorizedError ? "UnauthorizedError" : String(e);
}
if (authorizeURL) {
  // The user consents; the authorization server redirects back with a code.
  await transport.finishAuth("code-1");
}
const res = authorizeURL ? await client.callTool({ name: tool, arguments: JSON.parse(args) }) : null;
console.log(JSON.stringify({
  authorizeScope: authorizeURL?.searchParams.get("scope") ?? null,
  authorizeResource: authorizeURL?.searchParams.get("resource") ?? null,
  tokenRequest,
  firstError,
  retried: res ? { isError: res.isError ?? false, structuredContent: res.structuredContent } : null,
}));
await client.close();
