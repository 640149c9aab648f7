package proxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgate/toolgate/pipeline"
)

// TestAnswerScopeChallenges: a noted challenge turns the 200 the handler starts into the 403 (its
// body dropped), also when the handler flushes first; a response already started (an event stream
// opened before the scope was found missing) keeps its status and body; nothing noted, nothing
// changes; without an answer function the wrapper is not there at all.
func TestAnswerScopeChallenges(t *testing.T) {
	answer := func(w http.ResponseWriter, scopes []string) {
		w.Header().Set("WWW-Authenticate", "challenge "+scopes[0])
		w.WriteHeader(http.StatusForbidden)
	}
	cases := []struct {
		name     string
		handler  http.HandlerFunc
		status   int
		header   string
		bodyKept bool
	}{
		{"noted, then the JSON answer", func(w http.ResponseWriter, r *http.Request) {
			pipeline.NoteScopeChallenge(r.Context(), []string{"orders:write"})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"envelope":1}`))
		}, http.StatusForbidden, "challenge orders:write", false},
		{"noted, then a flush", func(w http.ResponseWriter, r *http.Request) {
			pipeline.NoteScopeChallenge(r.Context(), []string{"orders:write"})
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(`{"envelope":1}`))
		}, http.StatusForbidden, "challenge orders:write", false},
		{"the stream started first", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			pipeline.NoteScopeChallenge(r.Context(), []string{"orders:write"})
			_, _ = w.Write([]byte(`{"envelope":1}`))
		}, http.StatusOK, "", true},
		{"nothing noted", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(`{"envelope":1}`))
		}, http.StatusOK, "", true},
		{"an error status is left alone", func(w http.ResponseWriter, r *http.Request) {
			pipeline.NoteScopeChallenge(r.Context(), []string{"orders:write"})
			http.Error(w, `{"envelope":1}`, http.StatusBadRequest)
		}, http.StatusBadRequest, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			answerScopeChallenges(c.handler, answer).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mcp", nil))
			kept := rec.Body.Len() > 0
			if rec.Code != c.status || rec.Header().Get("WWW-Authenticate") != c.header || kept != c.bodyKept {
				t.Fatalf("got %d %q body %q", rec.Code, rec.Header().Get("WWW-Authenticate"), rec.Body.String())
			}
			if c.status == http.StatusForbidden && rec.Header().Get("Content-Type") == "application/json" {
				t.Fatal("the 403 kept the JSON answer's Content-Type")
			}
		})
	}
	mux := http.NewServeMux()
	if got := answerScopeChallenges(mux, nil); got != http.Handler(mux) {
		t.Fatal("without an answer function the handler is wrapped anyway")
	}
}
