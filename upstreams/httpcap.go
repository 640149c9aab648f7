package upstreams

import (
	"io"
	"mime"
	"net/http"
	"sync"
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
