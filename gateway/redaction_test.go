package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/redact/redacttest"
)

// TestRedactionEndToEnd: through the whole gateway, a real MCP client and
// a real upstream process, each default pattern's secret is replaced in a
// result (its text and its data), in a tool's error message, and in an
// upstream's stderr (every logged line and the tail logged when it exits);
// no secret reaches the client, the log or the audit trail, which holds
// the redacted text and what was redacted; toolgate_redactions_total
// counts every replacement by pattern.
func TestRedactionEndToEnd(t *testing.T) {
	samples := redacttest.Samples()
	var stderr []string
	for _, s := range samples {
		stderr = append(stderr, s.Text)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// leaky writes every sample to stderr and exits at once: its lines and
	// its stderr tail are logged.
	leaky := fmt.Sprintf("  leaky:\n    command: %q\n    args: [\"-stderr-line\", %q, \"-exit-at-start\", \"3\"]\n    env: {%s: \"1\"}\n",
		self, strings.Join(stderr, "\n"), upstreamRole)
	path := writeGateway(t, "", leaky) // a second server, beside echoes
	logs := &testkit.LogBuffer{}
	gw, err := New(context.Background(), Options{ConfigPath: path, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := gw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c := connectWithKey(t, ctx, gw, aliceKey)
	for _, s := range samples {
		res := callTool(t, ctx, c, "echoes__echo", map[string]any{"config": s.Text})
		body, _ := json.Marshal(res)
		if strings.Contains(string(body), jsonInner(s.Secret)) {
			t.Errorf("%s: the secret reached the client in a result: %s", s.Pattern, body)
		}
		if n := strings.Count(string(body), "[redacted:"+s.Pattern+"]"); n < 2 {
			t.Errorf("%s: %d replacements in the result, want the text and the data: %s", s.Pattern, n, body)
		}
		res = callTool(t, ctx, c, "echoes__fail", map[string]any{"message": s.Text})
		env := envelopeOf(t, res)
		if env.OK || env.ErrorCode != "tool_failed" || strings.Contains(env.Message, s.Secret) ||
			!strings.Contains(env.Message, "[redacted:"+s.Pattern+"]") {
			t.Errorf("%s: the tool's error reached the client as %+v", s.Pattern, env)
		}
	}
	gw.Close()

	logText := logs.String()
	audit, err := os.ReadFile(filepath.Join(filepath.Dir(path), "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range samples {
		for where, text := range map[string]string{"log": logText, "audit trail": string(audit)} {
			if strings.Contains(text, jsonInner(s.Secret)) {
				t.Errorf("%s: the %s holds the secret", s.Pattern, where)
			}
		}
		if !strings.Contains(string(audit), "[redacted:"+s.Pattern+"]") {
			t.Errorf("%s: the audit trail does not hold the redacted error text", s.Pattern)
		}
	}
	if !strings.Contains(string(audit), `"redactions":{"aws_access_key":1}`) {
		t.Error("the audit trail does not say what was redacted")
	}
	assertStderrRedacted(t, logs, samples)
	assertRedactionsCounted(t, gw, samples)
}

// assertStderrRedacted: leaky's stderr lines and its tail name every
// pattern and hold no secret (checked with the whole log above).
func assertStderrRedacted(t *testing.T, logs *testkit.LogBuffer, samples []redacttest.Sample) {
	t.Helper()
	var lines []string
	for _, rec := range logs.Records("upstream stderr") {
		if rec["server"] == "leaky" {
			lines = append(lines, fmt.Sprint(rec["line"]))
		}
	}
	var tail string
	for _, rec := range logs.Records("upstream unavailable") {
		if rec["server"] == "leaky" {
			tail = fmt.Sprint(rec["stderr_tail"])
		}
	}
	for _, s := range samples {
		want := "[redacted:" + s.Pattern + "]"
		if !strings.Contains(strings.Join(lines, "\n"), want) || !strings.Contains(tail, want) {
			t.Errorf("%s: stderr lines %q / tail %q lack %s", s.Pattern, lines, tail, want)
		}
	}
}

// assertRedactionsCounted: every pattern was replaced at least four times
// (the result's text and data, the error message, stderr).
func assertRedactionsCounted(t *testing.T, gw *Gateway, samples []redacttest.Sample) {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.metrics.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, s := range samples {
		var n float64
		series := `toolgate_redactions_total{pattern="` + s.Pattern + `"} `
		for line := range strings.SplitSeq(rec.Body.String(), "\n") {
			if v, ok := strings.CutPrefix(line, series); ok {
				_, _ = fmt.Sscan(v, &n)
			}
		}
		if n < 4 {
			t.Errorf("%s counted %v times, want at least 4", s.Pattern, n)
		}
	}
}

func connectWithKey(t *testing.T, ctx context.Context, gw *Gateway, key string) *client.Client {
	t.Helper()
	c, err := client.NewStreamableHttpClient("http://"+gw.Addr()+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{ProtocolVersion: mcp.LATEST_PROTOCOL_VERSION}}); err != nil {
		t.Fatal(err)
	}
	return c
}

func callTool(t *testing.T, ctx context.Context, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func envelopeOf(t *testing.T, res *mcp.CallToolResult) envelopeAnswer {
	t.Helper()
	var env envelopeAnswer
	raw, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("answer %s", raw)
	}
	return env
}

// jsonInner is s as it appears inside a JSON string.
func jsonInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
