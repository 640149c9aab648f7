package targets

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bench/load"
)

// leanHTTP is one Streamable HTTP session of the lean client (see
// lean_wire.go for why it exists). A worker makes one call at a time on
// it, so it keeps its buffers from call to call. Its connections come from
// the target's shared http.Client (keep-alive, an idle connection per
// worker).
type leanHTTP struct {
	hc     *http.Client
	url    string
	header http.Header // every request's, session id included once known
	tool   []byte      // the tool's name as a JSON string
	next   int64       // the last request id used
	body   bytes.Buffer
	sse    sseReader
}

var _ load.Session = (*leanHTTP)(nil)

// openLeanHTTP opens a session: POST initialize, keep the Mcp-Session-Id
// it answers with, POST notifications/initialized.
func openLeanHTTP(ctx context.Context, hc *http.Client, url string, headers map[string]string, tool string) (*leanHTTP, error) {
	s := &leanHTTP{hc: hc, url: url, header: http.Header{}, tool: toolJSON(tool)}
	s.header.Set("Content-Type", "application/json")
	s.header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		s.header.Set(k, v)
	}
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if err := s.initialize(ctx); err != nil {
		if s.header.Get("Mcp-Session-Id") != "" {
			s.close() // the session was opened: end it
		}
		return nil, err
	}
	return s, nil
}

func (s *leanHTTP) initialize(ctx context.Context) error {
	s.next++
	var sid string
	r, err := s.post(ctx, initializeBody(s.next), func(h http.Header) { sid = h.Get("Mcp-Session-Id") })
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if err := checkInitialize(r, s.next); err != nil {
		return err
	}
	if sid == "" {
		return errors.New("initialize: no Mcp-Session-Id: every target must serve a stateful session")
	}
	s.header.Set("Mcp-Session-Id", sid)
	s.header.Set("Mcp-Protocol-Version", protocolVersion)
	return s.notify(ctx, initializedBody)
}

// Call makes the measured call and checks its answer.
func (s *leanHTTP) Call(ctx context.Context, seq int64) error {
	s.next++
	msg := message(seq)
	r, err := s.post(ctx, appendCall(make([]byte, 0, 128), s.next, s.tool, msg), nil)
	if err != nil {
		return err
	}
	return checkCall(r, s.next, msg)
}

// post sends a request and reads its answer, a JSON body or an event
// stream; seen, when set, gets the response headers.
func (s *leanHTTP) post(ctx context.Context, body []byte, seen func(http.Header)) (*reply, error) {
	resp, err := s.send(ctx, http.MethodPost, body)
	if err != nil {
		return nil, err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return nil, statusError(resp)
	}
	if seen != nil {
		seen(resp.Header)
	}
	switch ct := mediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		return s.readJSON(resp.Body)
	case "text/event-stream":
		return s.readSSE(resp.Body)
	default:
		return nil, fmt.Errorf("answer of content type %q", ct)
	}
}

// notify sends a notification; the server accepts it with 202 (or 200).
func (s *leanHTTP) notify(ctx context.Context, body string) error {
	resp, err := s.send(ctx, http.MethodPost, []byte(body))
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return statusError(resp)
	}
	return nil
}

// send makes one HTTP request with the session's headers. The body is the
// caller's fresh slice: the transport may still read it after the answer.
func (s *leanHTTP) send(ctx context.Context, method string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = s.header // read only, and one request at a time per session
	return s.hc.Do(req)
}

func (s *leanHTTP) readJSON(body io.Reader) (*reply, error) {
	s.body.Reset()
	if _, err := s.body.ReadFrom(body); err != nil {
		return nil, err
	}
	r := new(reply)
	if err := json.Unmarshal(s.body.Bytes(), r); err != nil {
		return nil, fmt.Errorf("answer %.200q: %w", s.body.Bytes(), err)
	}
	return r, nil
}

// readSSE reads events until the answer. Notifications and server requests
// are skipped: the session declares no capabilities, so a server has
// nothing to ask it, and the stream of a POST carries that request's answer
// only.
func (s *leanHTTP) readSSE(body io.Reader) (*reply, error) {
	s.sse.reset(body)
	for {
		data, err := s.sse.next()
		if err != nil {
			return nil, fmt.Errorf("event stream ended before the answer: %w", err)
		}
		r := new(reply)
		if err := json.Unmarshal(data, r); err != nil {
			return nil, fmt.Errorf("event %.200q: %w", data, err)
		}
		if r.Method == "" {
			return r, nil
		}
	}
}

// close ends the session with DELETE, as mcp-go's client does, but with
// the target's headers: toolgate refuses a DELETE without the API key.
// Errors are ignored; the session then ends by the server's idle timeout.
func (s *leanHTTP) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := s.send(ctx, http.MethodDelete, nil); err == nil {
		drain(resp)
	}
}

// drain reads what is left of a body, so the connection is reused.
func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func statusError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
}

// mediaType is a Content-Type without its parameters, lower case.
func mediaType(ct string) string {
	ct, _, _ = strings.Cut(ct, ";")
	return strings.ToLower(strings.TrimSpace(ct))
}

// sseReader reads the data of server-sent events. Event names, ids and
// retry fields are ignored: the lean client never resumes a stream (each
// one carries one call's answer).
type sseReader struct {
	br   *bufio.Reader
	line []byte
	data []byte
}

func (r *sseReader) reset(body io.Reader) {
	if r.br == nil {
		r.br = bufio.NewReader(body)
		return
	}
	r.br.Reset(body)
}

// next is the next event's data (its data lines joined by newlines);
// events with empty data, such as the one a server primes a stream with,
// are skipped. The slice is valid until the next call. At the end of the
// stream, an event not closed by a blank line still counts, as in mcp-go's
// client.
func (r *sseReader) next() ([]byte, error) {
	r.data = r.data[:0]
	lines := 0
	for {
		line, err := r.readLine()
		if err != nil && err != io.EOF {
			return nil, err
		}
		if value, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if lines > 0 {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, bytes.TrimPrefix(value, []byte(" "))...)
			lines++
		}
		end := len(line) == 0 || err != nil
		if end && len(bytes.TrimSpace(r.data)) > 0 {
			return r.data, nil
		}
		if err != nil {
			return nil, err
		}
		if end {
			r.data, lines = r.data[:0], 0
		}
	}
}

// readLine reads one line without its line ending, however long.
func (r *sseReader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		chunk, err := r.br.ReadSlice('\n')
		r.line = append(r.line, chunk...)
		if err != bufio.ErrBufferFull {
			return bytes.TrimRight(r.line, "\r\n"), err
		}
	}
}

// openLeanHTTPSessions opens n sessions, setupParallel at a time; on
// failure the ones opened are closed again.
func openLeanHTTPSessions(ctx context.Context, n int, hc *http.Client, url string, headers map[string]string, tool string) ([]load.Session, func(), error) {
	opened := make([]*leanHTTP, n)
	errs := make([]error, n)
	sem := make(chan struct{}, setupParallel)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			opened[i], errs[i] = openLeanHTTP(ctx, hc, url, headers, tool)
		})
	}
	wg.Wait()
	closeAll := func() { closeLeanHTTP(opened) }
	for _, err := range errs {
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("open session: %w", err)
		}
	}
	sessions := make([]load.Session, n)
	for i, s := range opened {
		sessions[i] = s
	}
	return sessions, closeAll, nil
}

// closeLeanHTTP ends the sessions opened, setupParallel at a time.
func closeLeanHTTP(sessions []*leanHTTP) { closeParallel(sessions, (*leanHTTP).close) }
