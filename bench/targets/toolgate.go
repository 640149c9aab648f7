package targets

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
)

// startTimeout bounds a gateway's or peer's start, upstreams included: a
// catalog of 10,000 tools over 20 upstreams takes a while to compile.
const startTimeout = 3 * time.Minute

// Gateway is one toolgate configuration: what the harness writes into a
// directory of its own (config, model, policy, and beside them the audit
// trail and the pin file toolgate creates).
type Gateway struct {
	Servers []Upstream        // stdio upstreams; Name is the server name
	Policy  string            // policy.csv
	Keys    map[string]string // principal -> plain API key
	// Stdio is the principal of a client on stdio.
	Stdio string
	// Extra is YAML appended at the top level, e.g. an audit section.
	Extra string
	// NoFastPath sets listen.fast_path: false.
	NoFastPath bool
	// MaxResultBytes sets limits.max_result_bytes (zero: toolgate's default).
	MaxResultBytes int
	// Timeout sets limits.timeout (zero: toolgate's default).
	Timeout time.Duration
}

// Write writes toolgate.yaml, model.conf (the text given) and policy.csv
// into dir and returns the config's path.
//
// The gateway listens on ports the kernel picks (it logs them); the admin
// listener uses 127.0.0.2 because toolgate refuses the same address for both.
// max_in_flight is raised above the harness's 64 workers: at the default
// (64) a call still finishing while the next arrives is refused fast, and
// the table would measure refusals.
func (g Gateway) Write(dir, model string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: {http: \"127.0.0.1:0\", fast_path: %t}\nadmin: {listen: \"127.0.0.2:0\"}\n", !g.NoFastPath)
	b.WriteString("authz: {model: model.conf, policy: policy.csv}\n")
	fmt.Fprintf(&b, "auth:\n  stdio_principal: %s\n  api_keys:\n", g.Stdio)
	for _, p := range sortedKeys(g.Keys) {
		fmt.Fprintf(&b, "    - {principal: %s, sha256: %q}\n", p, HashKey(g.Keys[p]))
	}
	b.WriteString("limits: {max_in_flight: 256, init_timeout: 2m")
	if g.MaxResultBytes > 0 {
		fmt.Fprintf(&b, ", max_result_bytes: %d", g.MaxResultBytes)
	}
	if g.Timeout > 0 {
		fmt.Fprintf(&b, ", timeout: %s", g.Timeout)
	}
	b.WriteString("}\n")
	b.WriteString(g.Extra)
	b.WriteString("mcpServers:\n")
	for _, s := range g.Servers {
		args, _ := json.Marshal(s.Args)
		fmt.Fprintf(&b, "  %s:\n    command: %q\n    args: %s\n", s.Name, s.Command, args)
		if len(s.Env) > 0 {
			env, _ := json.Marshal(s.Env)
			fmt.Fprintf(&b, "    env: %s\n", env)
		}
	}
	files := map[string]string{"toolgate.yaml": b.String(), "model.conf": model, "policy.csv": g.Policy}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "toolgate.yaml"), nil
}

// HashKey is how toolgate stores an API key: SHA-256, hex.
func HashKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Toolgate is a running `toolgate serve` over Streamable HTTP.
type Toolgate struct {
	httpTarget
	Admin string // the admin listener's base URL
}

// StartToolgateHTTP runs `bin serve --config cfg` and waits for the log
// lines naming its two listeners. tool is the client-facing tool name, key
// the API key the sessions present, client what Open opens them with.
func StartToolgateHTTP(ctx context.Context, client Client, name, bin, cfg, tool, key string) (*Toolgate, error) {
	const serving, admin = "serving Streamable HTTP", "serving the admin API"
	p, err := startProcess(bin, []string{"serve", "--config", cfg}, nil, filepath.Dir(cfg), serving, admin)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	url, err := urlFrom(p.waitLine(ctx, serving))
	var base string
	if err == nil {
		base, err = urlFrom(p.waitLine(ctx, admin))
	}
	if err != nil {
		_ = p.stop(stopGrace)
		return nil, err
	}
	return &Toolgate{Admin: base, httpTarget: httpTarget{name: name, client: client, proc: p, url: url, tool: tool, hc: httpClient(),
		headers: map[string]string{"Authorization": "Bearer " + key}}}, nil
}

// URL is the gateway's Streamable HTTP endpoint.
func (t *Toolgate) URL() string { return t.url }

// Sessions opens n mcp-go client sessions presenting key, a few at a time
// (for requests other than the measured call: tools/list); close them with
// CloseSessions.
func (t *Toolgate) Sessions(ctx context.Context, n int, key string) ([]*client.Client, error) {
	return openHTTPSessions(ctx, n, t.hc, t.url, map[string]string{"Authorization": "Bearer " + key})
}

// CloseSessions ends sessions opened by Sessions.
func CloseSessions(clients []*client.Client) { closeAll(clients) }

// urlFrom reads the "url" attribute of one of toolgate's JSON log lines.
func urlFrom(line string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	var rec struct {
		URL string `json:"url"`
	}
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.URL == "" {
		return "", fmt.Errorf("no url in log line %q", line)
	}
	return rec.URL, nil
}

// StartToolgateStdio runs `bin serve --stdio --config cfg` as an MCP server
// over stdio.
func StartToolgateStdio(ctx context.Context, client Client, name, bin, cfg, tool string) (Target, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return startStdioWith(ctx, client, name, bin, []string{"serve", "--stdio", "--config", cfg}, nil, tool, true)
}

// StartDirect runs the upstream itself, for a native client to call
// directly: the physical limit the gateways are compared with.
func StartDirect(ctx context.Context, client Client, up Upstream) (Target, error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	return startStdioWith(ctx, client, "direct", up.Command, up.Args, up.Env, up.Tool, false)
}
