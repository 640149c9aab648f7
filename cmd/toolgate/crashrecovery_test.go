package main

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams"
)

// breakerOpened reports whether the gateway's log says server's circuit
// breaker opened.
func breakerOpened(log, server string) bool {
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, `"msg":"upstream circuit breaker open"`) && strings.Contains(line, `"server":"`+server+`"`) {
			return true
		}
	}
	return false
}

// holdDown makes server's first down status wait until the returned
// release is called (at the latest when the test ends): the status
// callback runs on the supervisor's goroutine, so the server stays down,
// before its restart backoff, while the test calls it. down receives why.
func holdDown(t *testing.T, set *upstreams.Set, server string) (down chan string, release func()) {
	down, hold := make(chan string, 1), make(chan struct{})
	var once, closed sync.Once
	release = func() { closed.Do(func() { close(hold) }) }
	t.Cleanup(release)
	set.OnStatusChange(func(s string, up bool, why string) {
		if s == server && !up {
			once.Do(func() {
				down <- why
				<-hold
			})
		}
	})
	return down, release
}

// A crashed stdio upstream is callable again as soon as its supervisor has
// restarted it (issue 16, item 3). Calls made while it restarts are
// refused at once as upstream_unavailable, retryable, each with one attempt
// (the supervisor's backoff governs). With the crash they are enough to
// open the default breaker (5 failures); before, the upstream, back after
// about a second, was then refused for open_for (30s). Now its reconnect
// turns the breaker half-open: with the default restart backoff (1s), the
// first call after the gateway reports the server up succeeds.
func TestCrashedUpstreamCallableWhenBackEndToEnd(t *testing.T) {
	url, logs, gw := httpGatewayFull(t, writeConfig(t, stdioUpstream(t, "crashy", "")))
	status := watchStatus(gw.Upstreams())
	down, release := holdDown(t, gw.Upstreams(), "crashy")
	c := connectHTTP(t, url, aliceKey)
	crashed := time.Now()
	if _, env := callE2E(t, c, "crashy__crash", `{}`); env["error_code"] != "upstream_error" {
		t.Fatalf("crash: %v", env)
	}
	select {
	case <-down:
	case <-time.After(30 * time.Second):
		t.Fatal("crashy never went down")
	}
	for i := range 4 { // while it restarts: refused at once, retryable
		if _, env := callE2E(t, c, "crashy__echo", fmt.Sprintf(`{"during":%d}`, i)); env["error_code"] != "upstream_unavailable" || env["retryable"] != true {
			t.Fatalf("call %d while down: %v", i, env)
		}
	}
	release()
	waitRestarted(t, status, "crashy")
	back := time.Now()
	if _, env := callE2E(t, c, "crashy__echo", `{"back":true}`); env["ok"] != true {
		t.Fatalf("the first call after crashy was back up: %v\ngateway log:\n%s", env, logs)
	}
	ok := time.Now()
	t.Logf("crash to first successful call: %s (back up to success: %s)", ok.Sub(crashed).Round(time.Millisecond), ok.Sub(back).Round(time.Millisecond))
	if took := ok.Sub(back); took > 3*time.Second {
		t.Errorf("the first successful call came %s after crashy was back", took)
	}
	if log := logs.String(); breakerOpened(log, "crashy") && !strings.Contains(log, `"msg":"upstream circuit breaker closed"`) {
		t.Errorf("crashy's breaker opened and did not close:\n%s", log)
	}
}

// A breaker that did open (here on the crash itself, failures: 1) turns
// half-open when the supervisor has the server back (initialize and
// tools/list answered), instead of refusing it until open_for (1h) ends:
// the next call is its probe, succeeds, and closes it.
func TestReconnectHalfOpensBreakerEndToEnd(t *testing.T) {
	fastBackoff(t, 50*time.Millisecond)
	url, logs, gw := httpGatewayFull(t, writeConfig(t, stdioUpstream(t, "crashy", "    breaker: {failures: 1, open_for: 1h}\n")))
	status := watchStatus(gw.Upstreams())
	down, release := holdDown(t, gw.Upstreams(), "crashy")
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "crashy__crash", `{}`); env["error_code"] != "upstream_error" {
		t.Fatalf("crash: %v", env)
	}
	<-down
	if !breakerOpened(logs.String(), "crashy") {
		t.Fatalf("the crash did not open the breaker (failures: 1):\n%s", logs)
	}
	if _, env := callE2E(t, c, "crashy__echo", `{}`); env["error_code"] != "upstream_unavailable" || !strings.Contains(env["message"].(string), "circuit open") {
		t.Fatalf("while open: %v", env)
	}
	release()
	waitRestarted(t, status, "crashy")
	if _, env := callE2E(t, c, "crashy__echo", `{"probe":true}`); env["ok"] != true {
		t.Fatalf("the first call after crashy was back up: %v\ngateway log:\n%s", env, logs)
	}
	if _, env := callE2E(t, c, "crashy__echo", `{"after":true}`); env["ok"] != true {
		t.Fatalf("after the probe: %v", env)
	}
	log := logs.String()
	if !strings.Contains(log, `"msg":"upstream circuit breaker half-open"`) || !strings.Contains(log, `"msg":"upstream circuit breaker closed"`) {
		t.Errorf("half-open and closed not logged:\n%s", log)
	}
}
