package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testupstream"
)

// limitingFront stands before a Streamable HTTP test upstream and refuses
// the next tools/call POSTs it is told to (status and Retry-After), passing
// everything else through. It records when each tools/call arrived.
type limitingFront struct {
	mu      sync.Mutex
	refuse  []refusal
	arrived []time.Time // every tools/call POST, refused or not
}

type refusal struct {
	status     int
	retryAfter string // "" sends none
}

func (f *limitingFront) handler(target *url.URL) http.Handler {
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1 // event streams pass through as they come
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				f.mu.Lock()
				f.arrived = append(f.arrived, time.Now())
				var no *refusal
				if len(f.refuse) > 0 {
					no = &f.refuse[0]
					f.refuse = f.refuse[1:]
				}
				f.mu.Unlock()
				if no != nil {
					if no.retryAfter != "" {
						w.Header().Set("Retry-After", no.retryAfter)
					}
					http.Error(w, http.StatusText(no.status), no.status)
					return
				}
			}
		}
		proxy.ServeHTTP(w, r)
	})
}

// next sets the refusals for the coming tools/call POSTs and forgets what
// arrived before.
func (f *limitingFront) next(r ...refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.refuse, f.arrived = r, nil
}

func (f *limitingFront) arrivals() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.arrived...)
}

// An HTTP upstream's 429 (or 503 with Retry-After) is a rate limit, not a
// broken transport (issue 16, item 1): the caller gets rate_limited,
// retryable, with the upstream's delay; the breaker (failures: 1) does not
// count it; a retry-safe tool is repeated only after the delay, and only
// when that fits in the call's deadline. Times are the upstream's own
// arrival times.
func TestUpstreamRateLimitOverHTTP(t *testing.T) {
	upURL, stop, err := testupstream.StartHTTP(testupstream.Options{Name: "rl"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	target, err := url.Parse(upURL)
	if err != nil {
		t.Fatal(err)
	}
	target.Path = ""
	front := &limitingFront{}
	srv := httptest.NewServer(front.handler(target))
	// Closed after the gateway (cleanups run last first): until then the
	// gateway holds a listening stream through it, and Close would wait.
	t.Cleanup(srv.Close)
	servers := fmt.Sprintf("  rl:\n    url: %q\n    egress: {allow: [loopback]}\n    breaker: {failures: 1, open_for: 1h}\n"+
		"    tools: {echo: {retry_safe: true, timeout: 10s}, sleep: {retry_safe: true, timeout: 800ms}}\n", srv.URL+"/mcp")
	gwURL, logs := httpGateway(t, writeConfig(t, servers))
	c := connectHTTP(t, gwURL, aliceKey)
	defer func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	}()

	// healthy checks that the breaker did not count the refusals: with
	// failures: 1, one counted failure would have opened it.
	healthy := func(when string) {
		t.Helper()
		front.next()
		if _, env := callE2E(t, c, "rl__echo", `{"after":"`+when+`"}`); env["ok"] != true {
			t.Fatalf("after %s, a plain call: %v (the breaker counted a rate limit?)", when, env)
		}
	}
	wantLimited := func(what string, env map[string]any) {
		t.Helper()
		if env["error_code"] != "rate_limited" || env["retryable"] != true || !strings.Contains(fmt.Sprint(env["message"]), "1s") {
			t.Errorf("%s: want rate_limited, retryable, naming the 1s delay; got %v", what, env)
		}
	}

	for _, status := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		name := fmt.Sprintf("HTTP %d, Retry-After: 1", status)

		// Not retry-safe: one attempt, the caller hears the rate limit.
		front.next(refusal{status, "1"})
		_, env := callE2E(t, c, "rl__ansi", `{}`)
		wantLimited(name+", a tool that is not retry-safe", env)
		if n := len(front.arrivals()); n != 1 {
			t.Errorf("%s: a tool that is not retry-safe reached the upstream %d times, want 1", name, n)
		}
		healthy(name)

		// Retry-safe, room in the deadline: repeated once, a second later.
		front.next(refusal{status, "1"})
		if _, env := callE2E(t, c, "rl__echo", `{}`); env["ok"] != true {
			t.Errorf("%s: a retry-safe tool with a 10s deadline: %v, want it repeated after 1s and answered", name, env)
		}
		if at := front.arrivals(); len(at) != 2 {
			t.Errorf("%s: a retry-safe tool reached the upstream %d times, want 2", name, len(at))
		} else if gap := at[1].Sub(at[0]); gap < time.Second {
			t.Errorf("%s: repeated %s after the refusal, before the 1s the upstream asked for", name, gap)
		}
		healthy(name + " and a retry")

		// Retry-safe, but the delay does not fit in 800ms: not repeated.
		front.next(refusal{status, "1"})
		_, env = callE2E(t, c, "rl__sleep", `{"ms":0}`)
		wantLimited(name+", a retry-safe tool with an 800ms deadline", env)
		if n := len(front.arrivals()); n != 1 {
			t.Errorf("%s: with a deadline shorter than Retry-After, the upstream saw %d attempts, want 1", name, n)
		}
		healthy(name + " and a deadline")
	}

	// A 503 without Retry-After is no rate limit: the upstream is failing.
	front.next(refusal{http.StatusServiceUnavailable, ""})
	if _, env := callE2E(t, c, "rl__ansi", `{}`); env["error_code"] == "rate_limited" {
		t.Errorf("HTTP 503 without Retry-After: %v, want it not called a rate limit", env)
	}
}
