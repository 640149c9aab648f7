package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// protocolVersion is the MCP version every session asks for (the harness's lean client's).
const protocolVersion = "2025-11-25"

// session is one Streamable HTTP MCP session of the soak's client: hand-written requests, one decode
// per answer, like bench/targets' lean client, but it reads the envelope toolgate answers with
// (structuredContent), so each call's outcome is its error_code rather than just "failed".
type session struct {
	hc     *http.Client
	url    string
	header http.Header
	next   int64
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		IdleConnTimeout:     time.Minute,
	}
	return &http.Client{Transport: tr}
}

// openSession sends initialize, keeps the session id, and sends notifications/initialized.
func openSession(ctx context.Context, hc *http.Client, url, key string) (*session, error) {
	s := &session{hc: hc, url: url, header: http.Header{}}
	s.header.Set("Content-Type", "application/json")
	s.header.Set("Accept", "application/json, text/event-stream")
	s.header.Set("Authorization", "Bearer "+key)
	s.next++
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + protocolVersion +
		`","capabilities":{},"clientInfo":{"name":"toolgate-soak","version":"1"}}}`
	resp, err := s.send(ctx, http.MethodPost, []byte(body))
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		return nil, fmt.Errorf("initialize: HTTP %d, session %q: %.300s", resp.StatusCode, sid, b)
	}
	s.header.Set("Mcp-Session-Id", sid)
	s.header.Set("Mcp-Protocol-Version", protocolVersion)
	resp, err = s.send(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	drain(resp)
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return s, nil
}

func (s *session) send(ctx context.Context, method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = s.header
	return s.hc.Do(req)
}

// close ends the session with DELETE.
func (s *session) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := s.send(ctx, http.MethodDelete, nil); err == nil {
		drain(resp)
	}
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// answer is the one decode of a tools/call answer.
type answer struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result *struct {
		IsError           bool `json:"isError"`
		StructuredContent *struct {
			OK        bool            `json:"ok"`
			Data      json.RawMessage `json:"data"`
			ErrorCode *string         `json:"error_code"`
			Message   *string         `json:"message"`
			Replayed  bool            `json:"replayed"`
		} `json:"structuredContent"`
	} `json:"result"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// outcome is what one call came to: "ok", the envelope's error_code, or what went wrong before an
// envelope (client_error, http_<status>, jsonrpc_error, bad_answer, wrong_answer). detail says more
// for the ones that are not envelopes.
type outcome struct {
	code     string
	replayed bool
	detail   string
}

// call makes one tools/call of tool with {"message": msg} and classifies the answer. An ok answer
// must carry msg back as data.message: anything else is wrong_answer (one call's answer given to
// another).
func (s *session) call(ctx context.Context, tool, msg string) outcome {
	s.next++
	id := s.next
	b := make([]byte, 0, 160)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = strconv.AppendInt(b, id, 10)
	b = append(b, `,"method":"tools/call","params":{"name":"`...)
	b = append(b, tool...)
	b = append(b, `","arguments":{"message":"`...)
	b = append(b, msg...)
	b = append(b, `"}}}`...)
	resp, err := s.send(ctx, http.MethodPost, b)
	if err != nil {
		return outcome{code: "client_error", detail: err.Error()}
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return outcome{code: "http_" + strconv.Itoa(resp.StatusCode), detail: string(body)}
	}
	var a *answer
	switch ct, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) {
	case "application/json":
		a = new(answer)
		if err := json.NewDecoder(resp.Body).Decode(a); err != nil {
			return outcome{code: "bad_answer", detail: err.Error()}
		}
	case "text/event-stream":
		a, err = readEvents(resp.Body)
		if err != nil {
			return outcome{code: "bad_answer", detail: err.Error()}
		}
	default:
		return outcome{code: "bad_answer", detail: "content type " + ct}
	}
	return classify(a, id, msg)
}

// readEvents reads an event stream until the answer (a message without a method).
func readEvents(body io.Reader) (*answer, error) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 8<<20)
	var data []byte
	flush := func() (*answer, bool) {
		defer func() { data = data[:0] }()
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, false
		}
		a := new(answer)
		if json.Unmarshal(data, a) != nil || a.Method != "" {
			return nil, false
		}
		return a, true
	}
	for sc.Scan() {
		line := sc.Bytes()
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
			continue
		}
		if len(line) == 0 {
			if a, ok := flush(); ok {
				return a, nil
			}
		}
	}
	if a, ok := flush(); ok {
		return a, nil
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return nil, errors.New("event stream ended before the answer")
}

// classify turns a decoded answer to request id into an outcome.
func classify(a *answer, id int64, msg string) outcome {
	if got, err := strconv.ParseInt(string(a.ID), 10, 64); err != nil || got != id {
		return outcome{code: "bad_answer", detail: fmt.Sprintf("answer to id %s, want %d", a.ID, id)}
	}
	if a.Error != nil {
		return outcome{code: "jsonrpc_error", detail: fmt.Sprintf("%d %s", a.Error.Code, a.Error.Message)}
	}
	if a.Result == nil || a.Result.StructuredContent == nil {
		return outcome{code: "bad_answer", detail: "no structuredContent"}
	}
	env := a.Result.StructuredContent
	if !env.OK {
		code := "error_without_code"
		if env.ErrorCode != nil {
			code = *env.ErrorCode
		}
		detail := ""
		if env.Message != nil {
			detail = *env.Message
		}
		return outcome{code: code, replayed: env.Replayed, detail: detail}
	}
	var data struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(env.Data, &data) != nil || data.Message != msg {
		return outcome{code: "wrong_answer", replayed: env.Replayed, detail: fmt.Sprintf("sent %q, got data %.200s", msg, env.Data)}
	}
	return outcome{code: "ok", replayed: env.Replayed}
}
