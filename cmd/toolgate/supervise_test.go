package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/upstreams"
)

// fastBackoff makes upstream restarts wait initial (doubling) for one test.
// upstreams.Start copies DefaultBackoff, so no goroutine reads it later.
func fastBackoff(t *testing.T, initial time.Duration) {
	t.Helper()
	old := upstreams.DefaultBackoff
	upstreams.DefaultBackoff = upstreams.Backoff{Initial: initial, Max: 4 * initial, ResetAfter: time.Minute}
	t.Cleanup(func() { upstreams.DefaultBackoff = old })
}

type upstreamStatus struct {
	server string
	up     bool
	why    string
}

// watchStatus collects a Set's status changes.
func watchStatus(set *upstreams.Set) chan upstreamStatus {
	ch := make(chan upstreamStatus, 1024)
	set.OnStatusChange(func(server string, up bool, why string) {
		select {
		case ch <- upstreamStatus{server, up, why}:
		default:
		}
	})
	return ch
}

func waitStatus(t *testing.T, ch chan upstreamStatus, server string, up bool) upstreamStatus {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case s := <-ch:
			if s.server == server && s.up == up {
				return s
			}
		case <-timeout:
			t.Fatalf("%s never went up=%v", server, up)
		}
	}
}

// waitRestarted waits until server has gone down and come back up: an
// "up" from its start, reported after the test began watching, must not
// pass for its restart's.
func waitRestarted(t *testing.T, ch chan upstreamStatus, server string) {
	t.Helper()
	waitStatus(t, ch, server, false)
	waitStatus(t, ch, server, true)
}

// waitCatalog waits until the Set's catalog satisfies ok, checking the
// current one first (the change may have happened already).
func waitCatalog(t *testing.T, set *upstreams.Set, what string, ok func(*upstreams.Catalog) bool) *upstreams.Catalog {
	t.Helper()
	changed := make(chan *upstreams.Catalog, 1024)
	set.OnCatalogChange(func(c *upstreams.Catalog) {
		select {
		case changed <- c:
		default:
		}
	})
	if c := set.Catalog(); ok(c) {
		return c
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case c := <-changed:
			if ok(c) {
				return c
			}
		case <-timeout:
			t.Fatalf("no catalog %s", what)
			return nil
		}
	}
}

func callable(name string) func(*upstreams.Catalog) bool {
	return func(c *upstreams.Catalog) bool {
		tool, ok := c.Resolve(name)
		return ok && !tool.Unreachable && !tool.Changed
	}
}

// A crashed stdio upstream answers upstream_unavailable at once while it is
// down (its tools stay listed), the other upstream is untouched, and after
// the backoff it is back, with its exit and stderr tail in the log.
func TestCrashedUpstreamRestartsEndToEnd(t *testing.T) {
	fastBackoff(t, 50*time.Millisecond)
	url, logs, gw := httpGatewayFull(t, writeConfig(t,
		stdioUpstream(t, "crashy", "", "-stderr-line", "crashy says hi")+stdioUpstream(t, "steady", "")))
	status := watchStatus(gw.Upstreams())
	down, release := holdDown(t, gw.Upstreams(), "crashy")
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "crashy__crash", `{}`); env["error_code"] != "upstream_error" {
		t.Fatalf("crash: %v", env)
	}
	select {
	case why := <-down:
		if !strings.Contains(why, "exit status 3") {
			t.Errorf("down because %q", why)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("crashy never went down")
	}
	if _, env := callE2E(t, c, "crashy__echo", `{}`); env["error_code"] != "upstream_unavailable" || env["retryable"] != true {
		t.Fatalf("while down: %v", env)
	}
	if names := toolNames(t, c); !contains(names, "crashy__echo") {
		t.Errorf("crashy's tools were unlisted while it restarts: %v", names)
	}
	if _, env := callE2E(t, c, "steady__echo", `{}`); env["ok"] != true {
		t.Errorf("steady suffered: %v", env)
	}
	release()
	waitRestarted(t, status, "crashy")
	if _, env := callE2E(t, c, "crashy__echo", `{"back":true}`); env["ok"] != true {
		t.Fatalf("after the restart: %v", env)
	}
	log := logs.String()
	if !strings.Contains(log, `"msg":"upstream exited"`) || !strings.Contains(log, `"exit":"exit status 3"`) ||
		!strings.Contains(log, `crashy says hi`) {
		t.Errorf("exit not logged with status and stderr tail:\n%s", log)
	}
}

// An upstream that fails to start comes up later on its own; its tools
// join the catalog and answer.
func TestUpstreamDownAtBootComesUpEndToEnd(t *testing.T) {
	fastBackoff(t, 50*time.Millisecond)
	marker := filepath.Join(t.TempDir(), "late-marker")
	url, logs, gw := httpGatewayFull(t, writeConfig(t, stdioUpstream(t, "late", "", "-fail-once", marker)+stdioUpstream(t, "steady", "")))
	waitCatalog(t, gw.Upstreams(), "with late__echo", callable("late__echo"))
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "late__echo", `{"late":1}`); env["ok"] != true {
		t.Fatalf("late__echo: %v", env)
	}
	if !strings.Contains(logs.String(), "first run") {
		t.Errorf("the failed start is not logged:\n%s", logs)
	}
}

// tools/list_changed from an upstream rebuilds the catalog; a hostile
// schema arriving that way is quarantined.
func TestUpstreamListChangeEndToEnd(t *testing.T) {
	// flip_tools is called twice with the same arguments on purpose: the
	// operator states it may be repeated, so duplicate suppression leaves it
	// alone.
	url, _, gw := httpGatewayFull(t, writeConfig(t, stdioUpstream(t, "flip", "    tools:\n      flip_tools: {retry_safe: true}\n")))
	c := connectHTTP(t, url, aliceKey)
	if _, env := callE2E(t, c, "flip__flip_tools", `{}`); env["ok"] != true {
		t.Fatalf("flip: %v", env)
	}
	waitCatalog(t, gw.Upstreams(), "with flip__flipped", callable("flip__flipped"))
	if _, env := callE2E(t, c, "flip__flipped", `{}`); env["ok"] != true {
		t.Fatalf("flipped: %v", env)
	}
	callE2E(t, c, "flip__flip_tools", `{}`)
	waitCatalog(t, gw.Upstreams(), "without flip__flipped", func(cat *upstreams.Catalog) bool { return !callable("flip__flipped")(cat) })
	callE2E(t, c, "flip__flip_tools", `{"hostile":true}`)
	waitCatalog(t, gw.Upstreams(), "quarantining flipped", func(cat *upstreams.Catalog) bool { return len(cat.Quarantined()) == 1 })
	if _, env := callE2E(t, c, "flip__flipped", `{}`); env["error_code"] != "tool_not_found" {
		t.Fatalf("the hostile flipped: %v", env)
	}
}

// Closing the gateway while upstreams crash-loop, hang in initialize and
// restart leaves no child process (goroutines: TestMain's goleak).
func TestCloseWhileRestartingEndToEnd(t *testing.T) {
	fastBackoff(t, time.Millisecond)
	cfg := writeConfig(t, stdioUpstream(t, "loop", "", "-exit-at-start", "3")+
		stdioUpstream(t, "hang", "    init_timeout: 200ms\n", "-hang-init")+
		stdioUpstream(t, "crashy", "", "-crash-after", "1"))
	logs := &syncBuffer{}
	gw, code := startGateway(context.Background(), cfg, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if gw == nil {
		t.Fatalf("gateway did not start: %d\n%s", code, logs)
	}
	t.Cleanup(func() {
		gw.Close() // on a failure path too: its upstreams are this process's children
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs)
		}
	})
	status := watchStatus(gw.Upstreams())
	if _, err := gw.Upstreams().CallTool(context.Background(), "crashy", "echo", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, status, "crashy", false)
	waitStatus(t, status, "loop", false)
	began := time.Now()
	gw.Close()
	if took := time.Since(began); took > 10*time.Second {
		t.Errorf("close took %s", took)
	}
	if pids := childPIDs(t, os.Getpid()); len(pids) > 0 {
		t.Errorf("child processes left: %s", describePIDs(pids))
	}
}

// describePIDs names each process by its command line and state, so a
// child another test left behind is told from one of this test's.
func describePIDs(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		comm, state := "", ""
		if i, j := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')'); i >= 0 && j > i && j+2 < len(stat) {
			comm, state = string(stat[i+1:j]), string(stat[j+2])
		}
		fmt.Fprintf(&b, "\n  %d %s (state %s): %s", pid, comm, state, bytes.ReplaceAll(bytes.TrimRight(cmdline, "\x00"), []byte{0}, []byte(" ")))
	}
	return b.String()
}
