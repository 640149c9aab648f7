package pipeline_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
)

// Every answer the chain makes carries its envelope as envelope.Encoded,
// which the answer's writer copies as it is: an envelope of another type
// (a json.RawMessage) would be checked and compacted again, a fifth of the
// CPU on large results, with every other test still passing.
func TestAnswersCarryEncodedEnvelopes(t *testing.T) {
	results := map[string]string{
		"plain text":      `{"content":[{"type":"text","text":"line 1\nline 2"}]}`,
		"JSON text":       `{"content":[{"type":"text","text":" {\"a\": [1, 2]} "}]}`,
		"structured":      `{"content":[],"structuredContent":{"a": "<b>"}}`,
		"no content":      `{"content":[]}`,
		"tool error":      `{"content":[{"type":"text","text":"boom"}],"isError":true}`,
		"not a result":    `[1, 2]`,
		"dirty text":      `{"content":[{"type":"text","text":"a\u001b[31mred"}]}`,
		"two text blocks": `{"content":[{"type":"text","text":"one"},{"type":"text","text":"two"}]}`,
	}
	for name, raw := range results {
		chain := pipelinetest.New(t, pipelinetest.Parts{Upstreams: &pipelinetest.Upstreams{Fn: pipelinetest.Answer(raw)}})
		res := chain.Handle(context.Background(), pipeline.Call{Subject: pipelinetest.Alice, Name: "orders__get", Args: []byte(`{"order_id":4821}`)})
		if _, ok := res.StructuredContent.(envelope.Encoded); !ok {
			t.Errorf("%s: structuredContent is a %T, not an envelope.Encoded", name, res.StructuredContent)
		}
		pipelinetest.Envelope(t, res) // and it decodes as one
	}
}
