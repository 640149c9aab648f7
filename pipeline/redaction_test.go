package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/redact"
	"github.com/toolgate/toolgate/redact/redacttest"
	"github.com/toolgate/toolgate/upstreams"
)

// redactingChain is a chain with the default redaction, a log and an
// audit trail to look into.
func redactingChain(t *testing.T, up pipeline.Upstreams) (*pipeline.Chain, *recordingAudit, *bytes.Buffer) {
	t.Helper()
	r, err := redact.New(redact.Options{})
	if err != nil {
		t.Fatal(err)
	}
	trail, logs := &recordingAudit{}, &bytes.Buffer{}
	return pipelinetest.New(t, pipelinetest.Parts{Upstreams: up, Redact: r,
		Recorder: &pipeline.Recorder{Audit: trail, Log: slog.New(slog.NewJSONHandler(logs, nil))}}), trail, logs
}

func call(c *pipeline.Chain) *mcp.CallToolResult {
	return c.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
}

// TestSecretsRedactedInEveryResultPart: each default pattern's secret is
// replaced in a text block, an embedded resource, the structured data
// (decoded, so JSON escapes cannot hide it) and the data made of the text,
// and the audit record counts what was replaced, per pattern.
func TestSecretsRedactedInEveryResultPart(t *testing.T) {
	for _, s := range redacttest.Samples() {
		t.Run(s.Pattern, func(t *testing.T) {
			text, _ := json.Marshal(s.Text)
			escaped := bytes.ReplaceAll(text, []byte(s.Secret[:1]), []byte(`\u00`+hex2(s.Secret[0])))
			raw := `{"content":[{"type":"text","text":` + string(text) + `},` +
				`{"type":"resource","resource":{"uri":"file:///x","text":` + string(text) + `}}],` +
				`"structuredContent":{"rows":[{"v":` + string(escaped) + `}]}}`
			chain, trail, _ := redactingChain(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)})
			res := call(chain)
			body, _ := json.Marshal(res)
			if bytes.Contains(body, []byte(jsonInner(s.Secret))) {
				t.Fatalf("the secret reached the client: %s", body)
			}
			if n := bytes.Count(body, []byte("[redacted:"+s.Pattern+"]")); n != 3 {
				t.Errorf("%d replacements in %s, want 3 (text, resource, data)", n, body)
			}
			if got := trail.records[0].Details["redactions"]; got == nil || got.(redact.Counts)[s.Pattern] != 3 {
				t.Errorf("audit details %v, want %s: 3", trail.records[0].Details, s.Pattern)
			}
		})
	}
}

// TestSecretsRedactedInErrors: a tool's error text (isError) and an
// upstream's JSON-RPC error message lose their secrets in the client's
// message, the log line and the audit record's reason.
func TestSecretsRedactedInErrors(t *testing.T) {
	aws := redacttest.Samples()[2]
	for name, up := range map[string]*pipelinetest.Upstreams{
		"isError": {Fn: pipelinetest.Answer(`{"content":[{"type":"text","text":"denied for ` + aws.Secret + `"}],"isError":true}`)},
		"rpc error": {Fn: pipelinetest.FailWith(&upstreams.CallError{Where: upstreams.Answered,
			RPC: &mcp.JSONRPCErrorDetails{Code: -32000, Message: "bad key " + aws.Secret}})},
	} {
		t.Run(name, func(t *testing.T) {
			chain, trail, logs := redactingChain(t, up)
			env := pipelinetest.Envelope(t, call(chain))
			if env.ErrorCode == nil || *env.ErrorCode != "tool_failed" || !strings.Contains(*env.Message, "[redacted:aws_access_key]") {
				t.Fatalf("envelope %+v", env)
			}
			rec, _ := json.Marshal(trail.records[0])
			for where, text := range map[string]string{"message": *env.Message, "log": logs.String(), "audit": string(rec)} {
				if strings.Contains(text, aws.Secret) {
					t.Errorf("the %s holds the secret: %s", where, text)
				}
			}
			if !strings.Contains(string(rec), "[redacted:aws_access_key]") {
				t.Errorf("the audit record does not hold the redacted text: %s", rec)
			}
			if !strings.Contains(logs.String(), `"redactions":{"aws_access_key":1}`) {
				t.Errorf("the log line does not count the redaction: %s", logs.String())
			}
		})
	}
}

func hex2(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// jsonInner is s as it appears inside a JSON string.
func jsonInner(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
