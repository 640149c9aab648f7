package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"
)

// While failing, stdout carries one JSON-RPC error response per request,
// under the request's own id (number or string, in a batch too), with the
// startup error as its message; notifications, responses and lines that
// are not JSON-RPC get nothing. It stops when stdin closes.
func TestStdioFailAnswersRequestsOnly(t *testing.T) {
	const msg = "toolgate: invalid policy:\n  /x/policy.csv: cannot read"
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":"abc","result":{}}`,
		`not json`,
		``,
		`{"jsonrpc":"2.0","id":"s-2","method":"tools/list"}`,
		`[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/cancelled"}]`,
		`[{"jsonrpc":"2.0","method":"notifications/cancelled"}]`,
	}, "\n") + "\n"
	var out bytes.Buffer
	why := answerStartupError(context.Background(), strings.NewReader(in), &out, msg, time.Minute)
	if why != "stdin closed" {
		t.Errorf("stopped because %q, want stdin closed", why)
	}
	type response struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("stdout:\n%s\nwant three lines: the answers to id 1, id \"s-2\" and the batch", out.String())
	}
	var got []string
	for i, ln := range lines {
		var rs []response
		if i == 2 {
			if err := json.Unmarshal([]byte(ln), &rs); err != nil || len(rs) != 1 {
				t.Fatalf("batch answer %q: %v", ln, err)
			}
		} else {
			var r response
			if err := json.Unmarshal([]byte(ln), &r); err != nil {
				t.Fatalf("line %q: %v", ln, err)
			}
			rs = append(rs, r)
		}
		for _, r := range rs {
			if r.JSONRPC != "2.0" || r.Error.Code != stdioFailCode || r.Error.Message != msg {
				t.Errorf("answer %q", ln)
			}
			got = append(got, string(r.ID))
		}
	}
	if strings.Join(got, " ") != `1 "s-2" 3` {
		t.Errorf("answered ids %v", got)
	}
}

// With stdin left open and silent, it gives up after the linger bound;
// a signal (ctx) ends it at once.
func TestStdioFailWaitIsBounded(t *testing.T) {
	r, w := io.Pipe()
	defer w.Close() // ends the reader
	var out bytes.Buffer
	if why := answerStartupError(context.Background(), r, &out, "x", time.Millisecond); !strings.Contains(why, "no more requests") {
		t.Errorf("stopped because %q", why)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r2, w2 := io.Pipe()
	defer w2.Close()
	if why := answerStartupError(ctx, r2, &out, "x", time.Hour); why != "stopped by a signal" {
		t.Errorf("stopped because %q", why)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing", out.String())
	}
}
