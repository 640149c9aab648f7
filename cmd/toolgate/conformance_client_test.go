package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The conformance suite's client scenarios check what an MCP client sends
// to a mock server. Here the client under test is toolgate's upstream
// side: the suite runs this test binary (role "conformance-client") with
// the mock server's URL; it starts toolgate with that URL as its one
// upstream and drives the scenario's calls through it with mcp-go's client.
// Scenarios toolgate cannot pass are listed with a reason in
// testdata/conformance/client.txt; a stale entry fails.

// conformanceClientScenarios are the client scenarios run here; the auth/*
// ones run in TestConformanceClientAuthScenarios.
var conformanceClientScenarios = []string{"initialize", "tools_call", "elicitation-sep1034-client-defaults", "sse-retry"}

func TestConformanceClientScenarios(t *testing.T) {
	node, cli := suiteCLI(t)
	model, _ := filepath.Abs("../../model.conf")
	expected := expectedFailures(t, "testdata/conformance/client.txt")
	command := fmt.Sprintf("env %s=conformance-client TOOLGATE_TEST_MODEL=%s GORACE=atexit_sleep_ms=0 %s", execRole, model, self(t))
	var table strings.Builder
	for _, scenario := range conformanceClientScenarios {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, node, cli, "client", "--command", command, "--scenario", scenario)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(node)+":"+os.Getenv("PATH"), "NO_COLOR=1")
		out, err := cmd.CombinedOutput()
		cancel()
		passed := err == nil && clientPassed.Match(out)
		fmt.Fprintf(&table, "%-40s %s\n", scenario, mark(passed))
		reason, listed := expected[scenario]
		switch {
		case !passed && !listed:
			t.Errorf("client scenario %s failed through toolgate:\n%s", scenario, out)
		case passed && listed:
			t.Errorf("stale expected failure %s (%s): it passes", scenario, reason)
		}
	}
	t.Log("\nclient scenarios through toolgate's upstream side:\n" + table.String())
}

// clientPassed is the suite's summary for a client scenario without
// failures.
var clientPassed = regexp.MustCompile(`(?m)Passed: (\d+)/(\d+), 0 failed`)

// conformanceClientMain is the client under test: toolgate in front of the
// mock server at the last argument, driven by one mcp-go client.
func conformanceClientMain(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: conformance-client <server url>")
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg, err := mockUpstreamConfig(args[len(args)-1], os.Getenv("TOOLGATE_TEST_MODEL"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer os.RemoveAll(filepath.Dir(cfg))
	gw, code := startGateway(context.Background(), cfg, log)
	if gw == nil {
		return code
	}
	defer gw.Close()
	endpoint := gw.MCPHandler()
	srv := httptest.NewServer(endpoint)
	defer srv.Close()
	defer endpoint.Shutdown(context.Background())
	if err := driveScenario(srv.URL+"/mcp", os.Getenv("MCP_CONFORMANCE_SCENARIO")); err != nil {
		fmt.Fprintln(os.Stderr, "scenario:", err)
		return 1
	}
	return 0
}

// mockUpstreamConfig writes a config with url as the one unprefixed
// upstream and an anonymous principal allowed everything of it.
func mockUpstreamConfig(url, modelPath string) (string, error) {
	dir, err := os.MkdirTemp("", "toolgate-conformance-client")
	if err != nil {
		return "", err
	}
	model, err := os.ReadFile(modelPath)
	if err != nil {
		return "", err
	}
	files := map[string]string{
		"model.conf":    string(model),
		"policy.csv":    "p, conformance, mock/*, call, allow\np, conformance, mock/*, read, allow\np, conformance, mock/*, get, allow\n",
		"toolgate.yaml": fmt.Sprintf("auth:\n  allow_anonymous: conformance\nmcpServers:\n  mock:\n    url: %q\n    egress: {allow: [loopback]}\n    prefix: \"\"\n", url),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return filepath.Join(dir, "toolgate.yaml"), nil
}

// driveScenario lists the tools through toolgate and calls each one the
// scenario expects, answering elicitations with the schema's defaults.
func driveScenario(url, scenario string) error {
	tr, err := transport.NewStreamableHTTP(url, transport.WithContinuousListening())
	if err != nil {
		return err
	}
	c := client.NewClient(tr, client.WithElicitationHandler(defaultsElicitor{}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		return err
	}
	defer c.Close()
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	req.Params.ClientInfo = mcp.Implementation{Name: "toolgate-conformance-driver", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		return err
	}
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return err
	}
	for _, tool := range tools.Tools {
		call := mcp.CallToolRequest{}
		call.Params.Name = tool.Name
		call.Params.Arguments = map[string]any{}
		if tool.Name == "add_numbers" {
			call.Params.Arguments = map[string]any{"a": 5, "b": 3}
		}
		res, err := c.CallTool(ctx, call)
		if err != nil {
			return fmt.Errorf("%s: %w", tool.Name, err)
		}
		out, _ := json.Marshal(res.StructuredContent)
		fmt.Fprintf(os.Stderr, "%s %s -> %s\n", scenario, tool.Name, out)
	}
	return nil
}

// defaultsElicitor accepts every elicitation with the default of each
// field that has one (what a client applying SEP-1034 defaults sends when
// the user changes nothing).
type defaultsElicitor struct{}

func (defaultsElicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	content := map[string]any{}
	schema, _ := json.Marshal(req.Params.RequestedSchema)
	var s struct {
		Properties map[string]struct {
			Default any `json:"default"`
		} `json:"properties"`
	}
	if json.Unmarshal(schema, &s) == nil {
		for name, p := range s.Properties {
			if p.Default != nil {
				content[name] = p.Default
			}
		}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}
