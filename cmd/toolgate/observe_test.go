package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/authn"
)

// scrape GETs path from the admin listener, with key when not "".
func scrape(t *testing.T, admin *httptest.Server, path, key string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, admin.URL+path, nil)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := admin.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// After a scripted sequence of calls through the real gateway, /metrics on
// the admin listener has exactly the counts the sequence implies; it wants
// the admin key, and the probes do not.
func TestMetricsAfterScriptedCalls(t *testing.T) {
	cfg := writeConfig(t, stdioUpstream(t, "hostile", ""))
	write(t, cfg, mustRead(t, cfg)+fmt.Sprintf("admin: {key_sha256: %q}\n", authn.HashKey(adminKey)))
	url, _, gw := httpGatewayFull(t, cfg)
	admin := httptest.NewServer(gw.AdminHandler())
	defer admin.Close()

	alice, bob := connectHTTP(t, url, aliceKey), connectHTTP(t, url, bobKey)
	callE2E(t, alice, "hostile__echo", `{"a":1}`)
	callE2E(t, alice, "hostile__echo", `{"a":2}`)
	callE2E(t, alice, "hostile__sleep", `{"ms":"x"}`)     // invalid_arguments
	callE2E(t, bob, "hostile__sleep", `{"ms":1}`)         // tool_not_allowed
	callE2E(t, alice, "hostile__no_such_tool", `{}`)      // tool_not_found
	callE2E(t, alice, "hostile__fail", `{"message":"x"}`) // tool_failed

	if code, _ := scrape(t, admin, "/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("/metrics without the admin key: %d", code)
	}
	code, body := scrape(t, admin, "/metrics", adminKey)
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, want := range []string{
		`toolgate_calls_total{error_code="",outcome="ok",tool="hostile/echo"} 2`,
		`toolgate_calls_total{error_code="invalid_arguments",outcome="error",tool="hostile/sleep"} 1`,
		`toolgate_calls_total{error_code="tool_not_allowed",outcome="error",tool="hostile/sleep"} 1`,
		`toolgate_calls_total{error_code="tool_not_found",outcome="error",tool="unresolved"} 1`,
		`toolgate_calls_total{error_code="tool_failed",outcome="error",tool="hostile/fail"} 1`,
		// fail's isError result is an answered attempt: the tool's error is
		// the call's outcome (tool_failed), not the transport's.
		`toolgate_upstream_request_duration_seconds_count{outcome="succeeded",server="hostile"} 3`,
		`toolgate_stage_duration_seconds_count{stage="resolve"} 6`,
		`toolgate_stage_duration_seconds_count{stage="execute"} 3`,
		`toolgate_upstream_up{server="hostile"} 1`,
		`toolgate_breaker_state{server="hostile"} 0`,
		`toolgate_policy_reloads_total{result="error"} 0`,
		`toolgate_approvals_pending 0`,
		fmt.Sprintf(`toolgate_catalog_tools %d`, len(gw.Upstreams().Catalog().Tools())),
		fmt.Sprintf(`toolgate_policy_info{version=%q} 1`, gw.Policy().Current().Version()),
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, body := scrape(t, admin, path, ""); code != http.StatusOK {
			t.Errorf("%s: %d %s", path, code, body)
		}
	}
}

// A required upstream that is down makes /readyz fail, naming it; an
// optional one does not.
func TestReadinessFollowsRequiredUpstreams(t *testing.T) {
	servers := stdioUpstream(t, "hostile", "") + stdioUpstream(t, "down", "    required: true\n", "-exit-at-start", "3")
	url, _, gw := httpGatewayFull(t, writeConfig(t, servers))
	_ = url
	admin := httptest.NewServer(gw.AdminHandler())
	defer admin.Close()
	code, body := scrape(t, admin, "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream/down: not connected") || strings.Contains(body, "hostile") {
		t.Errorf("/readyz: %d %q", code, body)
	}
	if code, _ := scrape(t, admin, "/healthz", ""); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code, _ := scrape(t, admin, "/metrics", "anything"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without an admin key configured: %d, want 401", code)
	}
}
