package config

import (
	"fmt"
	"strings"
	"testing"
)

func httpServer(url, extra string) string {
	return "mcpServers:\n  s:\n    url: " + url + "\n" + extra
}

// egressProblems: each bad egress setting, and each url or token_url the guard would refuse at every
// connection, is one problem at its key that says what to write.
var egressProblems = []problemCase{
	{"loopback url without allow", httpServer("http://127.0.0.1:9000/mcp", ""), nil, 3, "mcpServers.s.url",
		"127.0.0.1 is a loopback address, which the egress guard refuses unless the server allows it: add egress: {allow: [loopback]}"},
	{"localhost url without allow", httpServer("http://localhost:9000/mcp", ""), nil, 3, "mcpServers.s.url", "localhost is a loopback address"},
	{"ipv6 loopback url", httpServer("http://[::1]:9000/mcp", "    egress: {allow: [private]}\n"), nil, 3, "mcpServers.s.url", "::1 is a loopback address"},
	{"private url without allow", httpServer("https://10.1.2.3/mcp", "    egress: {allow: [loopback]}\n"), nil, 3, "mcpServers.s.url",
		"10.1.2.3 is a private address, which the egress guard refuses unless the server allows it: add egress: {allow: [private]}"},
	{"private url outside the allowed prefix", httpServer("https://10.1.2.3/mcp", "    egress: {allow: [10.20.0.0/16]}\n"), nil, 3, "mcpServers.s.url",
		"10.1.2.3 is a private address"},
	{"metadata url even with link_local", httpServer("http://169.254.169.254/latest", "    egress: {allow: [link_local, 169.254.0.0/16]}\n"), nil, 3,
		"mcpServers.s.url", "169.254.169.254 is a cloud metadata address, which toolgate never connects to"},
	{"reserved url", httpServer("https://192.0.2.10/mcp", ""), nil, 3, "mcpServers.s.url",
		"192.0.2.10 is a reserved address, which the egress guard refuses unless the server allows it: add its prefix to egress.allow"},
	{"unknown class", httpServer("https://h.example.com/mcp", "    egress:\n      allow: [loopback, internal]\n"), nil, 5, "mcpServers.s.egress.allow[1]",
		`expected one of loopback, private, link_local or a CIDR prefix such as 10.20.0.0/16, got "internal"`},
	{"metadata class", httpServer("https://h.example.com/mcp", "    egress: {allow: [metadata]}\n"), nil, 4, "mcpServers.s.egress.allow[0]",
		"the cloud metadata addresses are never allowed"},
	{"host bits set", httpServer("https://h.example.com/mcp", "    egress: {allow: [10.1.2.3/8]}\n"), nil, 4, "mcpServers.s.egress.allow[0]",
		"expected a CIDR prefix with no host bits set: 10.0.0.0/8, not 10.1.2.3/8"},
	{"unknown egress key", httpServer("https://h.example.com/mcp", "    egress: {alow: [loopback]}\n"), nil, 4, "mcpServers.s.egress.alow",
		`unknown key; allowed keys here: allow (did you mean "allow"?)`},
	{"egress on stdio", "mcpServers:\n  s:\n    command: srv\n    egress: {allow: [loopback]}\n", nil, 4, "mcpServers.s.egress",
		"egress applies only to http and sse servers (url)"},
	{"loopback token_url without allow", "mcpServers:\n  s:\n    url: https://orders.example.com/mcp\n    auth:\n      mode: client_credentials\n" +
		"      token_url: http://127.0.0.1:9000/oauth/token\n      client_id: toolgate\n      client_secret: ${ORDERS_SECRET}\n", upstreamAuthEnv, 6,
		"mcpServers.s.auth.token_url", "127.0.0.1 is a loopback address, which the egress guard refuses unless the server allows it"},
}

func TestEgressProblems(t *testing.T) {
	for _, tt := range egressProblems {
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

// TestEgressAllowLoads: allowed addresses load, and a host name is not judged at load (it is judged on
// each connection, after DNS).
func TestEgressAllowLoads(t *testing.T) {
	src := "mcpServers:\n" +
		"  local:\n    url: http://127.0.0.1:9000/mcp\n    egress: {allow: [loopback]}\n" +
		"  lan:\n    url: https://10.20.1.2/mcp\n    egress: {allow: [10.20.0.0/16, \"fd00:1::/64\"]}\n" +
		"  named:\n    url: https://tools.internal/mcp\n"
	c, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"local": "[loopback] []", "lan": "[] [10.20.0.0/16 fd00:1::/64]", "named": "[] []"} {
		if got := fmt.Sprint(c.Servers[name].EgressAllow()); got != want {
			t.Errorf("%s: EgressAllow = %s, want %s", name, got, want)
		}
	}
}
