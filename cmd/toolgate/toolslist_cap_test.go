package main

import (
	"strings"
	"testing"
	"time"
)

// TestToolsListOverSizeCapEndToEnd (issue 16, item 15): an upstream whose
// tools/list answer is larger than its max_result_bytes allows is down, and
// the gateway's log says which limit it passed and which keys raise it.
func TestToolsListOverSizeCapEndToEnd(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "big", "    max_result_bytes: 1024\n", "-extra-tools", "1000"))
	_, logs := httpGateway(t, cfg)
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, r := range logs.Records("upstream unavailable") {
			msg, _ := r["err"].(string)
			if r["server"] != "big" {
				continue
			}
			for _, want := range []string{"tools/list", "66560 byte", "max_result_bytes 1024",
				"mcpServers.big.max_result_bytes", "limits.max_result_bytes"} {
				if !strings.Contains(msg, want) {
					t.Errorf("logged %q, which does not say %q", msg, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no failure logged for big; log:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
