package upstreams

import (
	"io"
	"mime"
	"net/http"
)

// cappedTransport wraps every upstream HTTP response body in a capReader:
// an event stream is capped per line, any other body as one message.
type cappedTransport struct {
	base       http.RoundTripper
	max        int
	onOversize func(id []byte)
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
	resp.Body = &cappedBody{Reader: newCapReader(resp.Body, t.max, framing, t.onOversize), closer: resp.Body}
	resp.ContentLength = -1 // a replaced body has a different length
	return resp, nil
}

type cappedBody struct {
	io.Reader
	closer io.Closer
}

func (b *cappedBody) Close() error { return b.closer.Close() }
