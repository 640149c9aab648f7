package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/toolgate/toolgate/internal/listenstream"
	"github.com/toolgate/toolgate/upstreams"
)

// openGET serves a GET for session through streams.Track that answers 200
// and stays open until the returned func is called.
func openGET(streams *listenstream.Streams, session string) (closeIt func()) {
	release := make(chan struct{})
	h := streams.Track(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		<-release
	}))
	req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
	req.Header.Set(server.HeaderKeySessionID, session)
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(httptest.NewRecorder(), req)
	}()
	return func() { close(release); <-done }
}

// A request for a 2025-era HTTP client waits for its listening stream: it
// goes on as soon as one opens, and gives up after listenstream.Grace or
// when the client's request ends, answering the upstream rather than
// hanging the call. Elicitation does not wait (it goes on the POST).
func TestRelayWaitsForListeningStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var streams listenstream.Streams
		r := &clientRelay{ctx: context.Background(), session: "s", listening: &streams}
		done := make(chan *upstreams.RelayError)
		go func() { done <- r.awaitListener(string(mcp.MethodSamplingCreateMessage)) }()
		synctest.Wait()
		closeOther := openGET(&streams, "other") // another session's stream does not count
		synctest.Wait()
		select {
		case err := <-done:
			t.Fatalf("went on without a stream: %v", err)
		default:
		}
		closeMine := openGET(&streams, "s")
		if err := <-done; err != nil {
			t.Fatalf("with a stream open: %v", err)
		}
		closeMine()
		closeOther()

		start := time.Now()
		go func() { done <- r.awaitListener(string(mcp.MethodListRoots)) }()
		if err := <-done; err == nil || !strings.Contains(err.Message, "no listening stream") {
			t.Fatalf("without a stream: %v", err)
		}
		if waited := time.Since(start); waited != listenstream.Grace {
			t.Errorf("gave up after %v, want %v", waited, listenstream.Grace)
		}
		if err := r.awaitListener(string(mcp.MethodElicitationCreate)); err != nil {
			t.Errorf("elicitation waited for a GET (it goes on the call's POST stream): %v", err)
		}

		ctx, cancel := context.WithCancel(context.Background())
		r.ctx = ctx
		go func() { done <- r.awaitListener(string(mcp.MethodSamplingCreateMessage)) }()
		synctest.Wait()
		cancel()
		if err := <-done; err == nil {
			t.Fatal("the client's request ended, the wait did not")
		}
	})
}
