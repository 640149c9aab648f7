package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// modernPost POSTs a 2026-07-28 message (its _meta added to params) as
// key, with the headers such a request carries, and returns the response.
func modernPost(ctx context.Context, t *testing.T, url, key, method, name, params string) *http.Response {
	t.Helper()
	meta := `"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.ProtocolVersion20260728 + `","` +
		mcp.MetaKeyClientCapabilities + `":{},"` + mcp.MetaKeyClientInfo + `":{"name":"raw","version":"1"},"x-vendor":"1"}`
	body := `{"jsonrpc":"2.0",`
	if name != "" {
		body += `"id":7,`
	}
	body += `"method":"` + method + `","params":{` + params + `,` + meta + `}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// On protocol 2026-07-28 over Streamable HTTP, a request is cancelled by
// closing its stream; a notifications/cancelled is neither required nor
// expected, and, with no session, names a request id any client may use.
// One POSTed by another principal must not cancel a call: mcp-go cancels
// the in-flight 2026-07-28 request of any client with that id (its key is
// the empty session's). The call here carries a vendor _meta member, so
// the fast path leaves it to mcp-go's handler.
func TestModernCancelNotificationCancelsNoOtherCallersCall(t *testing.T) {
	url, logs := httpGateway(t, writeConfig(t, stdioUpstream(t, "hostile", "")))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answered := make(chan string, 1)
	go func() {
		resp := modernPost(ctx, t, url, aliceKey, "tools/call", "hostile__sleep", `"name":"hostile__sleep","arguments":{"ms":1500}`)
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		answered <- string(body)
	}()
	// Bob's notifications keep coming until Alice's call answers: whichever
	// arrives while it runs must not end it.
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case body := <-answered:
			if !strings.Contains(body, `\"ok\":true`) && !strings.Contains(body, `"ok":true`) {
				t.Fatalf("Alice's call did not succeed: %s", body)
			}
			return
		case <-tick.C:
			resp := modernPost(ctx, t, url, bobKey, string(mcp.MethodNotificationCancelled), "", `"requestId":7,"reason":"not yours"`)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Errorf("the notification was answered HTTP %d, want 202", resp.StatusCode)
			}
		case <-ctx.Done():
			t.Fatal("Alice's call never answered")
		}
	}
}
