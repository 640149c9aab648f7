package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// An admin replaces policy.csv the way editors do (write aside, rename
// over). The running gateway reloads it: from the moment the reload is
// done, every new call of the revoked principal is denied, even with calls
// in flight; the affected client gets tools/list_changed, the unaffected
// one does not.
func TestPolicyHotReloadRevokesAtOnce(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	url, logs, gw := httpGatewayFull(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gw.Watch(ctx)
	logs.Await(t, "watching the policy for changes", 1) // a rename before the watch is in place goes unseen

	aliceChanged := make(chan struct{}, 4)
	var bobChanged atomic.Int32
	alice := connectHTTP(t, url, aliceKey, transport.WithContinuousListening())
	alice.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			aliceChanged <- struct{}{}
		}
	})
	bob := connectHTTP(t, url, bobKey, transport.WithContinuousListening())
	bob.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == string(mcp.MethodNotificationToolsListChanged) {
			bobChanged.Add(1)
		}
	})

	// Calls in flight while the policy changes.
	var revoked atomic.Bool
	var staleAllows atomic.Int32
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				after := revoked.Load()
				_, env := callE2E(t, alice, "hostile__echo", `{}`)
				if after && env["ok"] == true {
					staleAllows.Add(1)
				}
			}
		})
	}

	// Revoke alice's role: write the new policy aside and rename it over.
	policyPath := filepath.Join(filepath.Dir(cfg), "policy.csv")
	next := strings.ReplaceAll(testPolicy(servers), "g, alice, caller\n", "")
	tmp := policyPath + ".tmp"
	write(t, tmp, next)
	before := gw.Policy().Stats().Successes
	if err := os.Rename(tmp, policyPath); err != nil {
		t.Fatal(err)
	}
	select {
	case <-aliceChanged:
	case <-time.After(30 * time.Second):
		t.Fatal("alice never got tools/list_changed after the policy file was replaced")
	}
	if gw.Policy().Stats().Successes == before {
		t.Fatal("notification without a reload")
	}
	revoked.Store(true)
	// Let the in-flight loops make more calls under the new policy, then stop.
	for range 20 {
		if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["error_code"] != "tool_not_allowed" {
			t.Fatalf("revoked principal still allowed: %v", env)
		}
	}
	close(stop)
	wg.Wait()
	if n := staleAllows.Load(); n != 0 {
		t.Fatalf("%d calls allowed after the reload completed", n)
	}
	if names := toolNames(t, alice); len(names) != 0 {
		t.Errorf("alice still lists %v", names)
	}
	if _, env := callE2E(t, bob, "hostile__echo", `{}`); env["ok"] != true {
		t.Errorf("bob hurt by alice's revocation: %v", env)
	}
	if n := bobChanged.Load(); n != 0 {
		t.Errorf("bob got %d tools/list_changed though his tools did not change", n)
	}
}

// A broken edit keeps the last good policy: the gateway keeps deciding as
// before, and the failure is counted.
func TestBrokenPolicyEditKeepsLastGood(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	url, logs, gw := httpGatewayFull(t, cfg)
	c := connectHTTP(t, url, aliceKey)
	policyPath := filepath.Join(filepath.Dir(cfg), "policy.csv")
	for _, broken := range []string{"", ",\n", "p, caller, hostile/*, call, Allow\ng, alice, caller\n"} {
		write(t, policyPath, broken)
		if err := gw.Policy().Reload(); err == nil {
			t.Fatalf("reload of %q succeeded", broken)
		}
		if _, env := callE2E(t, c, "hostile__echo", `{}`); env["ok"] != true {
			t.Fatalf("after broken edit %q: %v", broken, env)
		}
	}
	if gw.Policy().Stats().Failures != 3 || !strings.Contains(logs.String(), "policy.csv") {
		t.Fatalf("failures %d; log:\n%s", gw.Policy().Stats().Failures, logs)
	}
}
