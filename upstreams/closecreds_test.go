package upstreams

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams/credentials"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// TestCloseClosesCredentials: a Set's Close closes its servers' credential sources, so a token
// request still in flight (the authorization server hangs) ends with the Set rather than up to
// its own 10s bound later. TestMain's goleak check covers what is left.
func TestCloseClosesCredentials(t *testing.T) {
	asked, ended := make(chan struct{}), make(chan struct{})
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // only then does the server notice the client leave
		close(asked)
		<-r.Context().Done() // hangs until the requester gives up
		close(ended)
	}))
	defer tokens.Close()
	src, err := credentials.New(credentials.Options{Server: "p", Mode: credentials.ClientCredentials,
		TokenURL: tokens.URL + "/token", ClientID: "gw", ClientSecret: "s",
		Egress: egress.Options{Allow: []egress.Class{egress.Loopback}}}) // the token server listens on loopback
	if err != nil {
		t.Fatal(err)
	}
	g := newGate()
	srv := Server{Name: "p", URL: "http://127.0.0.1:1/mcp", Credentials: src, ToolPrefix: "p__", Egress: loopbackOK,
		InitTimeout: 50 * time.Millisecond} // the first attempt gives up; the token request goes on
	set, err := Start(context.Background(), []Server{srv}, slog.New(slog.DiscardHandler), withWait(g.wait))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(generous):
		set.Close()
		t.Fatal("the upstream's first attempt never asked the authorization server for a token")
	}
	set.Close()
	select {
	case <-ended:
	case <-time.After(5 * time.Second): // fetchTimeout is 10s: only Close ends it sooner
		t.Fatal("the token request was still in flight after Set.Close: the credential source was not closed")
	}
}
