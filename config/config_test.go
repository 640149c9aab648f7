package config

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// envOf is a fixed environment, so tests do not depend on the machine's.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// parseProblems parses src as toolgate.yaml and returns its problems, failing the test if it loaded.
func parseProblems(t *testing.T, src string, env map[string]string) []Problem {
	t.Helper()
	c, err := Parse("toolgate.yaml", []byte(src), envOf(env))
	if err == nil {
		t.Fatalf("loaded without problems: %+v", c)
	}
	var ps *Problems
	if !errors.As(err, &ps) {
		t.Fatalf("error is %T, want *Problems: %v", err, err)
	}
	return ps.List
}

// TestProblems has one case per kind of problem. Each must be the only problem reported (no pile-on), and
// its message must name the file, the line, the key path and what was expected. The auth section's cases
// are in authProblems (auth_test.go).
func TestProblems(t *testing.T) {
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	tests := []problemCase{
		{"unknown top-level key", "listn: {http: ':1'}\n", nil, 1, "listn",
			`unknown key; allowed keys here: admin, approvals, audit, auth, authz, connect, console, credentials, description_scan, limits, listen, mcpServers, pinning, rate_limits, redaction, state, toolset_rules, toolsets (did you mean "listen"?)`},
		{"unknown key in server", stdio + "    timout: 8s\n", nil, 4, "mcpServers.orders.timout",
			`allowed keys here: args, auth, breaker, command, cwd, description_scan, disabled, egress, env, headers, init_timeout, max_in_flight, max_result_bytes, prefix, protocol, required, retry, retry_safe, timeout, tools, trusted, type, url (did you mean "timeout"?)`},
		{"rate of zero", stdio + "rate_limits:\n  principal: {rate: 0}\n", nil, 5, "rate_limits.principal.rate", "expected a rate above 0"},
		{"rate limit on an unknown server", stdio + "rate_limits:\n  tools:\n    pay/charge: {rate: 1}\n", nil, 6, `rate_limits.tools["pay/charge"]`, `names server "pay"`},
		{"rate limit on a client-facing name", stdio + "rate_limits:\n  tools:\n    orders__get: {rate: 1}\n", nil, 6, "rate_limits.tools.orders__get", "expected a canonical tool <server>/<tool>"},
		{"rate limit period too long", stdio + "rate_limits:\n  roles:\n    viewer: {rate: 1, per: 48h}\n", nil, 6, "rate_limits.roles.viewer.per", "expected a period from 1ms to 24h"},
		{"unknown upstream protocol", stdio + "    protocol: 2024-11-05\n", nil, 4, "mcpServers.orders.protocol",
			`expected one of 2025-11-25, 2026-07-28, got "2024-11-05"`},
		{"unknown key in tool", stdio + "    tools:\n      get_order: {retries: 3}\n", nil, 5, "mcpServers.orders.tools.get_order.retries",
			"unknown key; allowed keys here: max_result_bytes, override, retry_safe, timeout"},
		{"unknown key in listen", "listen:\n  port: 8080\n", nil, 2, "listen.port", "allowed keys here: allowed_origins, fast_path, http, max_body_bytes, session_idle_ttl"},
		{"limits is not a server key", stdio + "    limits: {timeout: 1s}\n", nil, 4, "mcpServers.orders.limits", "unknown key"},
		{"duplicate key", stdio + "    command: other\n", nil, 4, "mcpServers.orders.command", "duplicate key (first written on line 3)"},
		{"args not a list", stdio + "    args: --verbose\n", nil, 4, "mcpServers.orders.args", `expected a list of strings, got the string "--verbose"`},
		{"number in args", stdio + "    args: [--port, 8080]\n", nil, 4, "mcpServers.orders.args[1]", `expected a string, got the number 8080 (quote it: "8080")`},
		{"env value not a string", stdio + "    env: {DEBUG: true}\n", nil, 4, "mcpServers.orders.env.DEBUG", `expected a string, got the boolean true`},
		{"server not a mapping", "mcpServers:\n  orders: yes\n", nil, 2, "mcpServers.orders", "expected a mapping with keys args, auth, breaker, command"},
		{"env value a mapping", stdio + "    env: {DEBUG: {on: true}}\n", nil, 4, "mcpServers.orders.env.DEBUG", `expected a string, got a mapping`},
		{"bool not a bool", stdio + "    disabled: \"yes\"\n", nil, 4, "mcpServers.orders.disabled", `expected true or false, got the string "yes"`},
		{"bytes not an integer", "limits: {max_result_bytes: 1MiB}\n", nil, 1, "limits.max_result_bytes", `expected an integer number of bytes such as 1048576, got the string "1MiB"`},
		{"bad duration", stdio + "    timeout: fast\n", nil, 4, "mcpServers.orders.timeout", `expected a duration such as "8s", got "fast"`},
		{"duration as a number", "limits: {timeout: 8}\n", nil, 1, "limits.timeout", `expected a duration such as "8s", got the number 8 (write "8s" or another unit)`},
		{"timeout too long", stdio + "    timeout: 20m\n", nil, 4, "mcpServers.orders.timeout", "expected a duration from 10ms to 10m, got 20m"},
		{"timeout too short", "limits: {timeout: 1ms}\n", nil, 1, "limits.timeout", "expected a duration from 10ms to 10m, got 1ms"},
		{"tool timeout out of range", stdio + "    tools: {slow: {timeout: 1h}}\n", nil, 4, "mcpServers.orders.tools.slow.timeout", "from 10ms to 10m, got 1h"},
		{"negative timeout", "limits: {timeout: -1s}\n", nil, 1, "limits.timeout", "from 10ms to 10m, got -1s"},
		{"max_result_bytes too small", stdio + "    max_result_bytes: 10\n", nil, 4, "mcpServers.orders.max_result_bytes",
			"expected a number of bytes from 1024 (1 KiB) to 67108864 (64 MiB), got 10"},
		{"max_result_bytes too large", "limits: {max_result_bytes: 67108865}\n", nil, 1, "limits.max_result_bytes", "to 67108864 (64 MiB), got 67108865"},
		{"init_timeout out of range", "limits: {init_timeout: 6m}\n", nil, 1, "limits.init_timeout", "expected a duration from 100ms to 5m, got 6m"},
		{"session ttl out of range", "listen: {session_idle_ttl: 25h}\n", nil, 1, "listen.session_idle_ttl", "from 1m to 24h, got 25h"},
		{"max body out of range", "listen: {max_body_bytes: 100}\n", nil, 1, "listen.max_body_bytes", "from 1024 (1 KiB) to 67108864 (64 MiB), got 100"},
		{"bad server name", "mcpServers:\n  \"my server\": {command: x}\n", nil, 2, `mcpServers["my server"]`, `server names must be 1 to 64 of A-Z a-z 0-9 _ -, got "my server"`},
		{"server name too long", "mcpServers:\n  " + strings.Repeat("a", 65) + ": {command: x}\n", nil, 2, "mcpServers." + strings.Repeat("a", 65), "server names must be 1 to 64"},
		{"__ in server name", "mcpServers:\n  my__orders: {command: x}\n", nil, 2, "mcpServers.my__orders", `must not contain "__"`},
		{"bad prefix", stdio + "    prefix: \"o.\"\n", nil, 4, "mcpServers.orders.prefix", `expected at most 63 of A-Z a-z 0-9 _ -, got "o."`},
		{"both command and url", stdio + "    url: http://x/mcp\n", nil, 4, "mcpServers.orders.url", "set either command (stdio) or url (http, sse), not both"},
		{"neither command nor url", "mcpServers:\n  orders: {args: [x]}\n", nil, 2, "mcpServers.orders", "expected command (a stdio server) or url (an http or sse server)"},
		{"null server", "mcpServers:\n  orders:\n", nil, 2, "mcpServers.orders", "expected command (a stdio server) or url"},
		{"type sse with command", stdio + "    type: sse\n", nil, 4, "mcpServers.orders.type", `type "sse" needs url, but command is set`},
		{"type stdio with url", "mcpServers:\n  s: {url: http://x/mcp, type: stdio}\n", nil, 2, "mcpServers.s.type", `type "stdio" needs command, but url is set`},
		{"unknown type", stdio + "    type: websocket\n", nil, 4, "mcpServers.orders.type", `expected one of stdio, http, streamable-http, streamableHttp, sse, got "websocket"`},
		{"headers on stdio", stdio + "    headers: {X-A: b}\n", nil, 4, "mcpServers.orders.headers", "headers applies only to http and sse servers (url)"},
		{"env on http", "mcpServers:\n  s:\n    url: http://x/mcp\n    env: {A: b}\n", nil, 4, "mcpServers.s.env", "env applies only to stdio servers (command)"},
		{"arguments in command", "mcpServers:\n  s: {command: npx -y server}\n", nil, 2, "mcpServers.s.command", "put its arguments in args"},
		{"url scheme", "mcpServers:\n  s: {url: \"ftp://user:secret@x/mcp\"}\n", nil, 2, "mcpServers.s.url", `expected an http:// or https:// URL, got "ftp://user:xxxxx@x/mcp"`},
		{"url without scheme", "mcpServers:\n  s: {url: localhost:9000}\n", nil, 2, "mcpServers.s.url", "expected an http:// or https:// URL"},
		{"url does not parse", "mcpServers:\n  s: {url: \"http://[::1\"}\n", nil, 2, "mcpServers.s.url", "it does not parse"},
		{"bad header name", "mcpServers:\n  s:\n    url: http://x/mcp\n    headers: {\"X Token\": a}\n", nil, 4, `mcpServers.s.headers["X Token"]`, "expected an HTTP header name"},
		{"header value with newline", "mcpServers:\n  s:\n    url: http://x/mcp\n    headers: {X-T: \"${T}\"}\n", map[string]string{"T": "a\r\nHost: evil"}, 4,
			"mcpServers.s.headers.X-T", "must not contain line breaks"},
		{"bad env name", stdio + "    env: {1BAD: x}\n", nil, 4, "mcpServers.orders.env.1BAD", "expected an environment variable name"},
		{"unset variable", "mcpServers:\n  search:\n    url: http://x/mcp\n    headers: {Authorization: \"Bearer ${SEARCH_TOKEN}\"}\n", nil, 4,
			"mcpServers.search.headers.Authorization", "environment variable SEARCH_TOKEN is not set (set it, or write ${SEARCH_TOKEN:-default})"},
		{"unterminated variable", stdio + "    args: [\"${HOME\"]\n", nil, 4, "mcpServers.orders.args[0]", `unterminated "${" (write "$${" for a literal "${")`},
		{"malformed variable", stdio + "    cwd: \"${A-b}\"\n", nil, 4, "mcpServers.orders.cwd", "invalid reference ${A-b}: expected ${NAME} or ${NAME:-default}"},
		{"bad sha256", "auth:\n  api_keys:\n    - {principal: alice, sha256: tg_live_secretkey}\n", nil, 3, "auth.api_keys[0].sha256",
			"expected 64 hex characters (the SHA-256 of the key, not the key), got 17 characters"},
		{"missing sha256", "auth:\n  api_keys:\n    - {principal: alice}\n", nil, 3, "auth.api_keys[0]", "sha256 is required"},
		{"missing principal", "auth:\n  api_keys:\n    - {sha256: " + hashA + "}\n", nil, 3, "auth.api_keys[0]", "principal is required"},
		{"duplicate key hash", "auth:\n  api_keys:\n    - {principal: alice, sha256: " + hashA + "}\n    - {principal: bob, sha256: " + strings.ToUpper(hashA) + "}\n", nil, 4,
			"auth.api_keys[1].sha256", "same key hash as auth.api_keys[0] (line 3); every API key must be distinct"},
		{"api_keys not a list", "auth: {api_keys: {alice: x}}\n", nil, 1, "auth.api_keys", "expected a list of {principal, sha256} mappings, got a mapping"},
		{"listen.allow_anonymous moved", "listen: {allow_anonymous: true}\n", nil, 1, "listen.allow_anonymous",
			"unknown key: replaced by auth.allow_anonymous: <principal>, the principal unauthenticated callers act as"},
		{"listen.anonymous_principal moved", "listen:\n  anonymous_principal: guest\n", nil, 2, "listen.anonymous_principal", "replaced by auth.allow_anonymous: <principal>"},
		{"allow_anonymous as a boolean", "auth: {allow_anonymous: true}\n", nil, 1, "auth.allow_anonymous",
			"expected the principal unauthenticated callers act as (a name such as guest), got the boolean true; leave it out to refuse calls without a credential"},
		{", in allow_anonymous", "auth: {allow_anonymous: \"a,b\"}\n", nil, 1, "auth.allow_anonymous", `without "$" or ","`},
		{"$ in principal", "auth: {stdio_principal: \"$$me\"}\n", nil, 1, "auth.stdio_principal", `expected a principal name without "$" or ","`},
		{", in principal", "auth:\n  api_keys:\n    - {principal: \"a,b\", sha256: " + hashA + "}\n", nil, 3, "auth.api_keys[0].principal", `without "$" or ","`},
		{"spaces around principal", "auth: {allow_anonymous: \" anon\"}\n", nil, 1, "auth.allow_anonymous", "without leading or trailing spaces"},
		{"listen.http not host:port", "listen: {http: \"8080\"}\n", nil, 1, "listen.http", `expected host:port such as "127.0.0.1:8080", got "8080"`},
		{"listen.http bad port", "listen: {http: \"localhost:http\"}\n", nil, 1, "listen.http", `expected a port number from 0 to 65535, got "http"`},
		{"listen.http bad host", "listen: {http: \"bad_host!:80\"}\n", nil, 1, "listen.http", `expected an IP address or host name before the port, got "bad_host!"`},
		{"wildcard origin", "listen: {allowed_origins: [\"*\"]}\n", nil, 1, "listen.allowed_origins[0]", `expected an origin such as "https://app.example.com"`},
		{"origin with path", "listen: {allowed_origins: [\"https://a.example/app\"]}\n", nil, 1, "listen.allowed_origins[0]", "no path"},
		{"unknown alias", stdio + "    args: *nope\n", nil, 4, "mcpServers.orders.args", "alias *nope refers to no anchor &nope defined before it"},
		{"custom tag", stdio + "    args: !secret [x]\n", nil, 4, "mcpServers.orders.args", "unsupported YAML tag !secret"},
		{"top level not a mapping", "- a\n- b\n", nil, 1, "", "expected a mapping with keys admin, approvals, audit, auth, authz, connect, console, credentials, description_scan, limits, listen, mcpServers, pinning, rate_limits, redaction, state, toolset_rules, toolsets, got a list"},
		{"two documents", "listen: {}\n---\nauth: {}\n", nil, 2, "", "expected one YAML document, found 2"},
		{"empty tool name", stdio + "    tools: {\"\": {timeout: 1s}}\n", nil, 4, `mcpServers.orders.tools[""]`, "expected a tool name, got an empty key"},
		{"url without host", "mcpServers:\n  s: {url: \"http:///mcp\"}\n", nil, 2, "mcpServers.s.url", `expected a URL with a host, got "http:///mcp"`},
		{"control character in principal", "auth: {stdio_principal: \"a\\tb\"}\n", nil, 1, "auth.stdio_principal", "without control characters"},
		{"bytes beyond int64", "limits: {max_result_bytes: 9300000000000000000}\n", nil, 1, "limits.max_result_bytes", "got 9300000000000000000, which is too large"},
		{"bytes beyond uint64", "limits: {max_result_bytes: 99999999999999999999}\n", nil, 1, "limits.max_result_bytes", "got 99999999999999999999, which is too large"},
		{"negative bytes", "limits: {max_result_bytes: -1}\n", nil, 1, "limits.max_result_bytes", "got -1"},
		{"duration not a scalar", "limits: {timeout: [8s]}\n", nil, 1, "limits.timeout", `expected a duration such as "8s", got a list`},
		{"unset variable in a principal is reported once", "auth: {allow_anonymous: \"${WHO}\"}\n", nil, 1,
			"auth.allow_anonymous", "environment variable WHO is not set"},
		{"unset variable in prefix", stdio + "    prefix: \"${P}\"\n", nil, 4, "mcpServers.orders.prefix", "environment variable P is not set"},
		{"syntax error", "mcpServers:\n  orders: {command: [x\n", nil, 2, "", "invalid YAML: sequence end token ']' not found"},
	}
	tests = append(tests, authProblems...)
	tests = append(tests, resilienceProblems...)
	tests = append(tests, pinningProblems...)
	tests = append(tests, approvalsProblems...)
	tests = append(tests, auditProblems...)
	tests = append(tests, stateProblems...)
	tests = append(tests, argumentProblems...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) {
				t.Errorf("got  %s\nwant prefix %s", got, want)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant it to contain %s", got, tt.want)
			}
		})
	}
}

// problemCase is one row of TestProblems: src must yield exactly one problem, at line and key, containing
// want.
type problemCase struct {
	name string
	src  string
	env  map[string]string
	line int
	key  string
	want string
}

// locate is the start of a problem line for the file toolgate.yaml.
func locate(line int, key string) string {
	s := "toolgate.yaml"
	if line > 0 {
		s += ":" + strconv.Itoa(line)
	}
	if key != "" {
		s += ": " + key
	}
	return s + ": "
}

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
