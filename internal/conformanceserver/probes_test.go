package conformanceserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const (
	undeclaredSampling = `{"jsonrpc":"2.0","id":401,"method":"tools/call","params":{"name":"test_missing_capability","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	declaredSampling = `{"jsonrpc":"2.0","id":402,"method":"tools/call","params":{"name":"test_missing_capability","arguments":{},` +
		`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"sampling":{}}}}}`
	legacyCall = `{"jsonrpc":"2.0","id":403,"method":"tools/call","params":{"name":"test_missing_capability","arguments":{}}}`
)

// wantMissingSampling checks answer is the -32021 refusal of request 401,
// its data a ClientCapabilities object naming sampling, as the 0.2.0-alpha
// suite's sep-2575-server-rejects-undeclared-capability requires.
func wantMissingSampling(t *testing.T, answer []byte) {
	t.Helper()
	var msg struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				RequiredCapabilities map[string]map[string]any `json:"requiredCapabilities"`
			} `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &msg); err != nil {
		t.Fatalf("answer %s: %v", answer, err)
	}
	if msg.ID != 401 || msg.Error.Code != -32021 || msg.Error.Data.RequiredCapabilities["sampling"] == nil {
		t.Fatalf("answer %s, want id 401, code -32021 and requiredCapabilities {sampling: {}}", answer)
	}
}

func TestUndeclaredCapabilityRefusedOverHTTP(t *testing.T) {
	var passed []string
	gate := capabilityGate(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		passed = append(passed, string(b))
	}))
	rec := httptest.NewRecorder()
	gate.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(undeclaredSampling)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("status %d, want 400", rec.Code)
	}
	wantMissingSampling(t, rec.Body.Bytes())
	for _, body := range []string{declaredSampling, legacyCall} {
		gate.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)))
	}
	if len(passed) != 2 || passed[0] != declaredSampling || passed[1] != legacyCall {
		t.Fatalf("handed on %q, want the declared and the 2025 call intact", passed)
	}
}

func TestUndeclaredCapabilityRefusedOverStdio(t *testing.T) {
	var out bytes.Buffer
	in := strings.NewReader(undeclaredSampling + "\n" + declaredSampling + "\n" + legacyCall)
	got, err := io.ReadAll(newCapabilityGateReader(in, &out))
	if err != nil {
		t.Fatal(err)
	}
	if want := declaredSampling + "\n" + legacyCall; string(got) != want {
		t.Fatalf("the server read %q, want %q", got, want)
	}
	wantMissingSampling(t, bytes.TrimSpace(out.Bytes()))
}
