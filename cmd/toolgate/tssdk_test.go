package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The official TypeScript SDK lists and calls tools through toolgate and
// accepts the structured output (it validates structuredContent against the
// advertised outputSchema, so a mismatch fails the call).
//
// It needs node and `npm install` in e2e/ts; .ci/run does both and sets
// TOOLGATE_REQUIRE_NODE=1 so that a missing install fails instead of skipping.
func TestTypeScriptSDKClient(t *testing.T) {
	script, _ := filepath.Abs("../../e2e/ts/client.mjs")
	node, err := exec.LookPath("node")
	_, modErr := os.Stat("../../e2e/ts/node_modules/@modelcontextprotocol/sdk")
	if err != nil || modErr != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("node (%v) or the SDK in e2e/ts/node_modules (%v) missing", err, modErr)
		}
		t.Skip("node or e2e/ts/node_modules missing: run npm install in e2e/ts")
	}
	url, _ := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	out, err := exec.Command(node, script, url, aliceKey,
		"hostile__good_output_twin", `{}`, // not in the catalog: tool_not_found envelope
		"hostile__echo", `{"id":1,"s":"x"}`,
		"hostile__sleep", `{"ms":"x"}`,
		"hostile__good_output", `{}`, // upstream output schema nested under data
	).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("TypeScript client failed: %v\n%s", err, stderr)
	}
	var got struct {
		Tools []string `json:"tools"`
		Calls []struct {
			Name              string         `json:"name"`
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"calls"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if !contains(got.Tools, "hostile__echo") {
		t.Errorf("tools %v lack hostile__echo", got.Tools)
	}
	want := []struct {
		code    any
		isError bool
	}{{"tool_not_found", true}, {nil, false}, {"invalid_arguments", true}, {nil, false}}
	if len(got.Calls) != len(want) {
		t.Fatalf("%d calls answered, want %d", len(got.Calls), len(want))
	}
	for i, w := range want {
		c := got.Calls[i]
		if c.IsError != w.isError || c.StructuredContent["error_code"] != w.code {
			t.Errorf("%s: isError=%v envelope=%v, want code %v", c.Name, c.IsError, c.StructuredContent, w.code)
		}
	}
}
