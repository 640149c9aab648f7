package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/sanitize"
)

// maxCheckMessage bounds what /readyz shows of one check's message.
const maxCheckMessage = 200

// Health answers the liveness and readiness probes. The zero Health is ready to use, and ready: it has
// no checks until AddReadiness adds some. It is safe for concurrent use.
//
// The gateway registers these readiness checks (names as /readyz shows them):
//
//   - "policy": a policy is loaded and in force (authz.Store exists; a refused reload keeps the last
//     good one, so this fails only before the first load);
//   - "audit": the audit log is writable (its last write or sync did not fail);
//   - "upstream/<server>": for each server the configuration requires, it is connected
//     (upstreams.Set.Status). Servers that are not required stay out, so one optional upstream being
//     down never takes the gateway out of a load balancer;
//   - "state": with state.redis, the shared store answers its health check (state.Client.Err).
//
// Checks run on every /readyz request, one after another, so they must be quick and must not block:
// they read state the gateway already keeps rather than probing anything.
type Health struct {
	mu     sync.RWMutex
	checks []check
}

type check struct {
	name string
	fn   func() error
}

// AddReadiness adds a check that /readyz runs: it is ready while fn returns nil. fn's error message is
// shown to whoever can reach the admin listener, so it must be short and must not carry file paths,
// secrets or stacks; Readyz keeps only its first line, at most 200 bytes. Names are unique, non-empty
// and one line; breaking that is a programming error and panics.
func (h *Health) AddReadiness(name string, fn func() error) {
	if name == "" || strings.ContainsAny(name, "\r\n") || fn == nil {
		panic(fmt.Sprintf("metrics: invalid readiness check %q", name))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if slices.ContainsFunc(h.checks, func(c check) bool { return c.name == name }) {
		panic(fmt.Sprintf("metrics: readiness check %q added twice", name))
	}
	h.checks = append(h.checks, check{name, fn})
}

// Healthz answers 200 "ok" while the process serves HTTP: a liveness probe that restarts the gateway
// must not depend on an upstream or the policy, which a restart would not fix.
func (h *Health) Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeText(w, http.StatusOK, "ok\n")
	})
}

// Readyz answers 200 "ok" when every check passes, else 503 with one line "<name>: <message>" per
// failing check, in the order they were added.
func (h *Health) Readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		failing := h.failing()
		if len(failing) == 0 {
			writeText(w, http.StatusOK, "ok\n")
			return
		}
		writeText(w, http.StatusServiceUnavailable, strings.Join(failing, "\n")+"\n")
	})
}

// failing runs every check and returns "<name>: <message>" for each that fails. The checks run
// outside the lock, so a slow one never holds up AddReadiness.
func (h *Health) failing() []string {
	h.mu.RLock()
	checks := slices.Clone(h.checks)
	h.mu.RUnlock()
	var out []string
	for _, c := range checks {
		if err := c.run(); err != nil {
			out = append(out, c.name+": "+shortMessage(err))
		}
	}
	return out
}

// run calls the check. A panicking check fails instead of taking the probe down, and its panic value
// (which may hold anything) is not shown.
func (c check) run() (err error) {
	defer func() {
		if recover() != nil {
			err = errCheckPanicked
		}
	}()
	return c.fn()
}

var errCheckPanicked = errors.New("check panicked")

// shortMessage is the first line of err's message, cleaned of control characters and clipped: a
// check that wraps an error with a stack or a long cause still shows one short line.
func shortMessage(err error) string {
	msg, _, _ := strings.Cut(sanitize.Text(err.Error()), "\n")
	msg = sanitize.Clip(strings.TrimSpace(msg), maxCheckMessage)
	if msg == "" {
		return "failed"
	}
	return msg
}

func writeText(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store") // a probe must never see a cached answer
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
