package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// When `serve --stdio` cannot start (a bad config, an unusable audit trail,
// an upstream that failed...), exiting at once leaves the client with
// nothing but "Connection closed", and the reason in a log file the user
// may never open. Instead the process stays just long enough to answer
// every request the client sends (initialize first) with a JSON-RPC error
// whose message is the startup error, the same text it printed to stderr,
// and then exits with status 2, as a failed start always does.
//
// Showing that text to the client is fine: the stdio client is the local
// user who started the process on their own config, and the text names only
// their own files and keys (what failed, file:line, key). It is never done
// over HTTP, where the client is someone else.
//
// It stops when stdin closes (the client gave up: Claude Desktop closes the
// pipe once initialize fails), when the process is told to stop, or after
// stdioFailLinger at most, so a client that keeps the pipe open and sends
// nothing does not keep a dead gateway around. stdout carries nothing but
// JSON-RPC: one error response per request, none for notifications (they
// get no answer), for responses or for lines that are not JSON-RPC
// messages (there is no request id to answer them under).

// stdioFailLinger bounds how long a stdio gateway that could not start
// waits for requests to answer with its startup error.
const stdioFailLinger = 30 * time.Second

// stdioFailCode is the JSON-RPC error code of the answers: -32000, the first
// of the codes JSON-RPC leaves to the server. Not -32603 (internal error):
// SDK clients such as mcp-go turn the codes JSON-RPC and MCP define into
// their own fixed errors and drop the message, which is the point here.
const stdioFailCode = -32000

// maxStdioFailLine bounds one line read while failing; a longer one ends
// the wait.
const maxStdioFailLine = 16 << 20

// answerStartupError answers every JSON-RPC request read from in with an
// error response carrying msg, on out, until in ends, ctx ends or linger
// passes. It reports how it stopped, for the log.
func answerStartupError(ctx context.Context, in io.Reader, out io.Writer, msg string, linger time.Duration) string {
	lines := make(chan []byte)
	stop := make(chan struct{})
	defer close(stop)
	readDone := make(chan error, 1)
	go func() { // ends on EOF, or when stop is closed after the next line
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 0, 64<<10), maxStdioFailLine)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-stop:
				readDone <- nil
				return
			}
		}
		readDone <- sc.Err()
	}()
	timer := time.NewTimer(linger)
	defer timer.Stop()
	w := bufio.NewWriter(out)
	for {
		select {
		case ln := <-lines:
			if answer := startupErrorAnswer(ln, msg); answer != nil {
				w.Write(answer)
				w.WriteByte('\n')
				if err := w.Flush(); err != nil {
					return fmt.Sprintf("stdout closed: %v", err)
				}
			}
		case err := <-readDone:
			if err != nil {
				return fmt.Sprintf("reading stdin: %v", err)
			}
			return "stdin closed"
		case <-ctx.Done():
			return "stopped by a signal"
		case <-timer.C:
			return fmt.Sprintf("no more requests after %v", linger)
		}
	}
}

// rpcMessage is what answerStartupError reads of a message.
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type rpcErrorResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Error   rpcError        `json:"error"`
}

// startupErrorAnswer is the answer to one line: an error response for a
// request, an array of them for a batch holding requests, nil for anything
// else.
func startupErrorAnswer(line []byte, msg string) []byte {
	line = bytes.TrimSpace(line)
	answer := func(m rpcMessage) *rpcErrorResponse {
		if m.Method == "" || len(m.ID) == 0 { // a response, or a notification
			return nil
		}
		return &rpcErrorResponse{JSONRPC: "2.0", ID: m.ID, Error: rpcError{Code: stdioFailCode, Message: msg}}
	}
	var out any
	if bytes.HasPrefix(line, []byte("[")) {
		var batch []rpcMessage
		if json.Unmarshal(line, &batch) != nil {
			return nil
		}
		var answers []*rpcErrorResponse
		for _, m := range batch {
			if a := answer(m); a != nil {
				answers = append(answers, a)
			}
		}
		if len(answers) == 0 {
			return nil
		}
		out = answers
	} else {
		var m rpcMessage
		if json.Unmarshal(line, &m) != nil {
			return nil
		}
		a := answer(m)
		if a == nil {
			return nil
		}
		out = a
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	return b
}
