package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/mark3labs/mcp-go/client/transport"

	"github.com/toolgate/toolgate/internal/testupstream"
)

// BenchmarkCallThroughGateway reports what a caller waits for one call
// through the real gateway over Streamable HTTP (mcp-go client): to a live
// upstream, and to a dead one whose breaker is open.
//
//	go test ./cmd/toolgate -run XXX -bench CallThroughGateway -benchtime 2000x
func BenchmarkCallThroughGateway(b *testing.B) {
	liveURL, stopLive, err := testupstream.StartHTTP(testupstream.Options{Name: "live"})
	if err != nil {
		b.Fatal(err)
	}
	defer stopLive()
	deadURL, stopDead, err := testupstream.StartHTTP(testupstream.Options{Name: "dead"})
	if err != nil {
		b.Fatal(err)
	}
	// echo on dead is declared retry-safe so that duplicate suppression
	// leaves it alone: a recorded "outcome unknown" would otherwise be
	// replayed and the breaker would never see the later calls.
	servers := fmt.Sprintf("  live:\n    url: %q\n    egress: {allow: [loopback]}\n    tools: {echo: {retry_safe: true}}\n  dead:\n    url: %q\n    egress: {allow: [loopback]}\n    breaker: {failures: 3, open_for: 1h}\n    tools: {echo: {retry_safe: true}}\n", liveURL, deadURL)
	url, _ := httpGateway(b, writeConfig(b, servers))
	c := connectHTTP(b, url, aliceKey, keepAlive(b))
	stopDead() // from now on every call to dead is refused: the first counted, the rest known down
	for range 20 {
		callE2E(b, c, "dead__echo", `{}`)
	}
	if _, env := callE2E(b, c, "dead__echo", `{}`); env["error_code"] != "upstream_unavailable" {
		b.Fatalf("dead upstream: %v", env)
	}
	for _, tool := range []string{"live__echo", "dead__echo"} {
		b.Run(tool, func(b *testing.B) {
			for b.Loop() {
				callE2E(b, c, tool, `{}`)
			}
		})
	}
}

// BenchmarkCallStdioUpstream is one call through the in-process gateway
// over Streamable HTTP to a stdio upstream process: the profile shows the
// client, the gateway and the transports, not the upstream.
//
//	go test ./cmd/toolgate -run XXX -bench CallStdioUpstream -benchtime 3000x -cpuprofile cpu.out
func BenchmarkCallStdioUpstream(b *testing.B) {
	url, _ := httpGateway(b, writeConfig(b, stdioUpstream(b, "up", "")))
	c := connectHTTP(b, url, aliceKey, keepAlive(b))
	b.ReportAllocs()
	for b.Loop() {
		callE2E(b, c, "up__echo", `{"n":1}`)
	}
}

// keepAlive gives a benchmark's client its own pool with keep-alives on (a
// caller's usual connection; no server requests here, so the race
// ownHTTPClient avoids cannot arise).
func keepAlive(b *testing.B) transport.StreamableHTTPCOption {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	b.Cleanup(tr.CloseIdleConnections)
	return transport.WithHTTPBasicClient(&http.Client{Transport: tr})
}
