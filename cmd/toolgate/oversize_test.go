package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestOversizedRequestsEndToEnd (issue 16, item 7): over HTTP, a 5 MiB
// body is answered 413 with a JSON-RPC error, with and without
// Content-Length, and the gateway keeps serving; a 3 MiB argument object
// and 100-deep nesting fit the body cap but are refused with
// invalid_arguments (defaults 1 MiB and 64 levels) instead of forwarded;
// limits.max_argument_depth changes the depth cap.
func TestOversizedRequestsEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	raw, _ := os.ReadFile(cfg)
	write(t, cfg, strings.Replace(string(raw), "limits:\n", "limits:\n  max_argument_depth: 8\n", 1))
	url, _ := httpGateway(t, cfg)

	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"pad":"` + strings.Repeat("x", 5<<20) + `"}}`
	for _, known := range []bool{true, false} {
		var r io.Reader = strings.NewReader(body)
		if !known {
			r = io.MultiReader(r) // a reader of unknown length: sent chunked
		}
		req, _ := http.NewRequest(http.MethodPost, url, r)
		req.Header.Set("Authorization", "Bearer "+aliceKey)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("Content-Length %v: %v", known, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("Content-Length %v: status %d, want 413; %.200s", known, resp.StatusCode, got)
			continue
		}
		var rpc struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(got, &rpc); err != nil || rpc.Error.Code != -32600 ||
			rpc.Error.Message != "request body is over the 4194304 byte limit (listen.max_body_bytes)" {
			t.Errorf("Content-Length %v: answer %s", known, got)
		}
	}

	c := connectHTTP(t, url, aliceKey)
	big := `{"blob":"` + strings.Repeat("a", 3<<20) + `"}`
	deep := `{"v":` + strings.Repeat("[", 99) + "1" + strings.Repeat("]", 99) + "}" // 100 levels
	for _, tc := range []struct{ name, args, msg string }{
		{"3 MiB", big, fmt.Sprintf("arguments are %d bytes, over the 1048576 byte limit", len(big))},
		{"100 deep", deep, "arguments nest deeper than 8 levels"},
		{"9 deep", `{"v":` + strings.Repeat("[", 8) + strings.Repeat("]", 8) + "}", "arguments nest deeper than 8 levels"},
	} {
		_, env := callE2E(t, c, "hostile__echo", tc.args)
		if env["error_code"] != "invalid_arguments" || env["message"] != tc.msg {
			t.Errorf("%s: got %v %v, want invalid_arguments %q", tc.name, env["error_code"], env["message"], tc.msg)
		}
	}
	eight := `{"v":` + strings.Repeat("[", 7) + strings.Repeat("]", 7) + "}"
	if _, env := callE2E(t, c, "hostile__echo", eight); env["ok"] != true {
		t.Errorf("8 levels, at the cap: %v", env)
	}
}
