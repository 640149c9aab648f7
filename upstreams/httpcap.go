package upstreams

import (
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// cappedTransport wraps every upstream HTTP response body in a capReader:
// an event stream is capped per event, any other body as one message. It
// also tells the connection when a GET event stream (Streamable HTTP's
// listening stream, or legacy SSE's only stream) ends: the upstream may be
// gone.
type cappedTransport struct {
	base        http.RoundTripper
	max         int
	onOversize  func(id []byte)
	onStreamEnd func() // may be nil
}

func (t *cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if limited := rateLimited(req, resp); limited != nil {
		// Read a little so the connection can be reused, then refuse: the
		// error reaches the connection through mcp-go's wrapping (%w), which
		// would otherwise turn the status into text and drop Retry-After.
		_, _ = io.CopyN(io.Discard, resp.Body, 4096)
		_ = resp.Body.Close()
		return nil, limited
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	framing := frameWhole
	if mediaType == "text/event-stream" {
		framing = frameEvent
	}
	body := &cappedBody{Reader: newCapReader(resp.Body, t.max, framing, t.onOversize), closer: resp.Body}
	if framing == frameEvent && req.Method == http.MethodGet && t.onStreamEnd != nil {
		body.onEnd = t.onStreamEnd
	}
	resp.Body = body
	resp.ContentLength = -1 // a replaced body has a different length
	return resp, nil
}

type cappedBody struct {
	io.Reader
	closer io.Closer
	onEnd  func()
	ended  sync.Once
}

func (b *cappedBody) Read(p []byte) (int, error) {
	n, err := b.Reader.Read(p)
	if err != nil {
		b.end()
	}
	return n, err
}

func (b *cappedBody) Close() error {
	b.end()
	return b.closer.Close()
}

func (b *cappedBody) end() {
	if b.onEnd != nil {
		b.ended.Do(b.onEnd)
	}
}

// rateLimited is the error for a request the upstream refused for its rate
// limit or load, unprocessed: HTTP 429, or 503 with a Retry-After. Only a
// POST (a request or notification) is one; nil for anything else.
func rateLimited(req *http.Request, resp *http.Response) *RateLimitedError {
	if req.Method != http.MethodPost {
		return nil
	}
	after, named := retryAfter(resp.Header.Get("Retry-After"), time.Now())
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
	case resp.StatusCode == http.StatusServiceUnavailable && named:
	default:
		return nil
	}
	return &RateLimitedError{Status: resp.StatusCode, After: after}
}

// retryAfter parses a Retry-After value: delay-seconds or an HTTP date. A
// date in the past is no wait; named is false when v is absent or invalid.
func retryAfter(v string, now time.Time) (after time.Duration, named bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs < 0 {
			return 0, false
		}
		return time.Duration(min(secs, maxRetryAfter)) * time.Second, true
	}
	if at, err := http.ParseTime(v); err == nil {
		return min(max(at.Sub(now), 0), maxRetryAfter*time.Second), true
	}
	return 0, false
}

// maxRetryAfter bounds a parsed Retry-After (seconds): a day is longer than
// any call's deadline, so the call is not repeated either way.
const maxRetryAfter = 24 * 60 * 60
