package pipeline_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/internal/testkit"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// failingAudit is a trail whose writes fail.
type failingAudit struct{}

func (failingAudit) Append(audit.Record) error { return errors.New("disk full") }
func (failingAudit) Err() error                { return errors.New("disk full") }
func (failingAudit) FailClosed() bool          { return false }

// The log at info is for the calls an operator must look at: a call that
// succeeded and that the audit trail recorded is logged at debug, a
// refused or failed one at info, and a successful one the trail did not
// take (no trail, or a write that failed) at info too, so that every call
// is written down somewhere.
func TestCallLineLevel(t *testing.T) {
	ok := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)}
	refused := pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":"one"}`)}
	for _, tc := range []struct {
		name  string
		trail pipeline.AuditTrail
		call  pipeline.Call
		want  string // the line's level, "" for none at info
	}{
		{"succeeded, audited", &recordingAudit{}, ok, ""},
		{"refused, audited", &recordingAudit{}, refused, "INFO"},
		{"succeeded, no audit trail", nil, ok, "INFO"},
		{"succeeded, audit write failed", failingAudit{}, ok, "INFO"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
				var logs testkit.LogBuffer
				p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
				p.Recorder = &pipeline.Recorder{Log: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level})), Audit: tc.trail}
				p.Handle(context.Background(), tc.call)
				lines := logs.Records("tools/call")
				want := tc.want
				if want == "" && level == slog.LevelDebug {
					want = "DEBUG"
				}
				switch {
				case want == "" && len(lines) != 0:
					t.Fatalf("at %s: %v, want no line", level, lines)
				case want != "" && (len(lines) != 1 || lines[0]["level"] != want):
					t.Fatalf("at %s: %v, want one line at %s", level, lines, want)
				}
			}
		})
	}
}

// A call that failed inside the gateway is logged at error level.
func TestInternalErrorLineIsAnError(t *testing.T) {
	var logs testkit.LogBuffer
	p := pipelinetest.NewBuilder(t, &pipelinetest.Upstreams{Fn: pipelinetest.Answer(pipelinetest.OKText)})
	p.Guards = []pipeline.Link{pipeline.Step("boom", func(context.Context, *pipeline.Exchange) *envelope.Error {
		return envelope.Errorf(envelope.InternalError, "the gateway failed")
	})}
	p.Recorder = &pipeline.Recorder{Log: slog.New(slog.NewJSONHandler(&logs, nil)), Audit: &recordingAudit{}}
	p.Handle(context.Background(), pipeline.Call{Subject: alice, Name: "orders__get", Args: []byte(`{"order_id":1}`)})
	if lines := logs.Records("tools/call"); len(lines) != 1 || lines[0]["level"] != "ERROR" || lines[0]["error_code"] != "internal_error" {
		t.Fatalf("lines %v, want one at ERROR", lines)
	}
}
