package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A 2026-07-28 retry whose requestState names no call waiting for this
// caller (forged, stale, or another caller's) is refused as a JSON-RPC
// error (-32600, HTTP 400), not answered with a tool result and not run as
// a new call (issue 17, item 5). Before, it got an invalid_arguments
// envelope. mcp-go's client never sends a state it did not get, so the
// request is written by hand.
func TestForgedRequestStateIsAJSONRPCError(t *testing.T) {
	url, logs := httpGateway(t, writeConfig(t, everythingServer(t)))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	const tool = "everything__trigger-elicitation-request"
	body := `{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"` + tool + `","arguments":{},` +
		`"requestState":"tg-input-00000000000000000000000000000000","inputResponses":{},` +
		`"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.LATEST_PROTOCOL_VERSION + `",` +
		`"` + mcp.MetaKeyClientCapabilities + `":{"elicitation":{}},"` + mcp.MetaKeyClientInfo + `":{"name":"t","version":"1"}}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+aliceKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.LATEST_PROTOCOL_VERSION)
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", tool)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("HTTP %d, body %s: %v", resp.StatusCode, raw, err)
	}
	if answer.Error == nil || answer.Error.Code != mcp.INVALID_REQUEST || !strings.Contains(answer.Error.Message, "requestState") {
		t.Fatalf("HTTP %d, %s; want a -32600 error about the requestState", resp.StatusCode, raw)
	}
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HTTP %d, want 400", resp.StatusCode)
	}
}
