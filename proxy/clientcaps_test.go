package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/upstreams"
)

// A client is asked only what it declared it answers; one that declared
// nothing known is asked as before, and decides itself.
func TestUndeclaredCapabilityIsNeverAsked(t *testing.T) {
	var roots mcp.ClientCapabilities
	roots.Roots = &struct {
		ListChanged bool `json:"listChanged,omitempty"`
	}{}
	sampling := mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}}
	methods := []string{string(mcp.MethodSamplingCreateMessage), string(mcp.MethodElicitationCreate), string(mcp.MethodListRoots)}
	for _, tc := range []struct {
		name    string
		caps    clientCaps
		refused []bool // per method above
	}{
		{"nothing declared", capsOf(mcp.ClientCapabilities{}), []bool{true, true, true}},
		{"roots only", capsOf(roots), []bool{true, true, false}},
		{"sampling only", capsOf(sampling), []bool{false, true, true}},
		{"unknown", clientCaps{}, []bool{false, false, false}},
	} {
		for i, m := range methods {
			got := tc.caps.refusal(m, nil)
			if (got != nil) != tc.refused[i] {
				t.Errorf("%s: %s refused=%v, want %v", tc.name, m, got != nil, tc.refused[i])
			}
			if got != nil && got.Code != mcp.METHOD_NOT_FOUND {
				t.Errorf("%s: %s answered code %d, want -32601 (what a client without the method says)", tc.name, m, got.Code)
			}
		}
	}
}

// The upstream's roots/list during a call of a client that did not declare
// roots is answered by the gateway at once: a legacy client is not sent
// it (the relay never reaches mcp-go's server, nil here), and a 2026-07-28
// client gets no input_required for it.
func TestRelaysRefuseUndeclaredRoots(t *testing.T) {
	caps := capsOf(mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	legacy := &clientRelay{ctx: context.Background(), session: "s", caps: caps}
	parked := &parkedRelay{ctx: context.Background(), session: "s", caps: caps, call: &parkedCall{asks: make(chan inputRound), finished: make(chan struct{})}}
	for name, r := range map[string]upstreams.Relay{"legacy session": legacy, "2026-07-28 call": parked} {
		_, err := r.Request(context.Background(), string(mcp.MethodListRoots), nil)
		var re *upstreams.RelayError
		if !errors.As(err, &re) || re.Code != mcp.METHOD_NOT_FOUND {
			t.Errorf("%s: roots/list answered %v, want the -32601 RelayError", name, err)
		}
	}
}

// What a relay declares for its client (to a 2026-07-28 upstream) is what
// that client declared, sub-capabilities included; unknown stays unknown.
func TestRelaysDeclareWhatTheClientDeclared(t *testing.T) {
	var _ upstreams.CapabilityDeclarer = (*clientRelay)(nil)
	var _ upstreams.CapabilityDeclarer = (*parkedRelay)(nil)
	form := mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}, Tasks: &mcp.TasksCapability{}}
	got, known := (&clientRelay{caps: capsOf(form)}).Declared()
	if !known || got.Elicitation != form.Elicitation || got.Sampling != nil || got.Roots != nil || got.Tasks != nil {
		t.Errorf("declared %+v (known %v), want the client's elicitation and nothing the gateway does not relay", got, known)
	}
	if _, known := (&parkedRelay{}).Declared(); known {
		t.Error("a relay with nothing known declared something")
	}
}

// The sub-capabilities MCP makes a must are checked too: url-mode
// elicitation only for a client that declared it, form mode not for one
// that declared url only, and sampling with tools only with sampling.tools.
func TestUndeclaredSubCapabilityIsNeverAsked(t *testing.T) {
	formOnly := capsOf(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{}})
	urlOnly := capsOf(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{URL: &struct{}{}}})
	plainSampling := capsOf(mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{}})
	toolSampling := capsOf(mcp.ClientCapabilities{Sampling: &mcp.SamplingCapability{Tools: &struct{}{}}})
	elicit, sample := string(mcp.MethodElicitationCreate), string(mcp.MethodSamplingCreateMessage)
	for _, tc := range []struct {
		name    string
		caps    clientCaps
		method  string
		params  string
		refused bool
	}{
		{"form to a bare elicitation", formOnly, elicit, `{"message":"?"}`, false},
		{"url to a bare elicitation", formOnly, elicit, `{"mode":"url","url":"https://x"}`, true},
		{"url to url", urlOnly, elicit, `{"mode":"url","url":"https://x"}`, false},
		{"form to url only", urlOnly, elicit, `{"message":"?"}`, true},
		{"tools to plain sampling", plainSampling, sample, `{"messages":[],"tools":[{"name":"t"}]}`, true},
		{"plain to plain sampling", plainSampling, sample, `{"messages":[]}`, false},
		{"tools to sampling with tools", toolSampling, sample, `{"messages":[],"tools":[{"name":"t"}],"toolChoice":{"mode":"auto"}}`, false},
	} {
		if got := tc.caps.refusal(tc.method, json.RawMessage(tc.params)); (got != nil) != tc.refused {
			t.Errorf("%s: refused=%v (%v), want %v", tc.name, got != nil, got, tc.refused)
		}
	}
}
