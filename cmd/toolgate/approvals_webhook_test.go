package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/approvals/webhook"
	"github.com/toolgate/toolgate/authn"
	"github.com/toolgate/toolgate/internal/redistest"
)

// hookDelivery is one POST the test receiver got, verified, and when.
type hookDelivery struct {
	at    time.Time
	event webhook.Event
	err   error // the signature's check
}

// A held call is announced to the webhook of its approval rule: a signed JSON POST to a real
// receiver, retried after the receiver's 500, delivered once it answers 200, with a link to the
// request in the console (and, as the audit trail keeps only their digest, without the arguments),
// while the call itself answered approval_required at once. The decision is
// bound to the rule: after the policy's a line is edited, approving the request is refused (409), and
// the same call is held again as a new request, announced again.
func TestApprovalWebhookEndToEnd(t *testing.T) {
	const secret = "whsec_test_0123456789"
	t.Setenv("TOOLGATE_TEST_HOOK_SECRET", secret)
	got := make(chan hookDelivery, 8)
	answers := make(chan int, 8)
	answers <- http.StatusInternalServerError // the first delivery fails: the retry must follow
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := hookDelivery{at: time.Now(), err: webhook.Verify([]byte(secret), r.Header.Get(webhook.HeaderSignature), body, time.Now(), 0)}
		if err := json.Unmarshal(body, &d.event); err != nil && d.err == nil {
			d.err = err
		}
		got <- d
		select {
		case status := <-answers:
			w.WriteHeader(status)
		default:
		}
	}))
	defer receiver.Close()

	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	write(t, cfg, mustRead(t, cfg)+fmt.Sprintf(`admin: {key_sha256: %q}
console:
  public_url: https://admin.example.com
approvals:
  rules:
    - tools: ["hostile/tick"]
      ttl: 10m
      webhooks: [{url: %q, secret: "${TOOLGATE_TEST_HOOK_SECRET}", egress: {allow: [loopback]}}]
`, authn.HashKey(adminKey), receiver.URL+"/hook"))
	policyFile := filepath.Join(filepath.Dir(cfg), "policy.csv")
	write(t, policyFile, testPolicy(servers)+"a, caller, hostile/tick, call, label == 'refund'\n")
	url, logs, gw := httpGatewayFull(t, cfg)
	api := httptest.NewServer(approvals.Handler(gw.Approvals(), gw.Config().AdminKeySHA256(), slog.New(slog.DiscardHandler)))
	defer api.Close()
	admin := &approvals.Client{URL: api.URL, Key: adminKey}
	c := connectHTTP(t, url, aliceKey)

	sent := time.Now()
	_, env := callE2E(t, c, "hostile__tick", `{"label":"refund","ms":80}`)
	answered := time.Now()
	ids := pendingIDs(t, admin)
	if env["error_code"] != "approval_required" || len(ids) != 1 {
		t.Fatalf("held call: %v, pending %v", env, ids)
	}
	first, delivered := <-got, <-got
	for _, d := range []hookDelivery{first, delivered} {
		if d.err != nil || d.event.Request.ID != ids[0] || d.event.Request.Principal != "alice" || d.event.Request.Tool != "hostile/tick" ||
			d.event.Request.Arguments != nil || d.event.URL != "https://admin.example.com/ui/approvals?id="+ids[0] ||
			d.event.Request.ExpiresAt.Sub(d.event.Request.CreatedAt) != 10*time.Minute || d.event.Request.RuleDigest == "" {
			t.Fatalf("delivery %+v\nlog:\n%s", d, logs)
		}
	}
	t.Logf("approval_required answered %s after the call was sent; the webhook's first attempt arrived %s after the call was sent "+
		"(%s after the answer); delivered after one 500 and a retry %s after the answer",
		answered.Sub(sent), first.at.Sub(sent), first.at.Sub(answered), delivered.at.Sub(answered))

	// The rule changes: the held request can no longer be decided, and the call is held anew.
	write(t, policyFile, testPolicy(servers)+"a, caller, hostile/tick, call, label == 'refund' && ms > 10\n")
	if err := gw.Policy().Reload(); err != nil {
		t.Fatal(err)
	}
	var apiErr *approvals.APIError
	if _, err := admin.Approve(context.Background(), ids[0], "carol"); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict ||
		!strings.Contains(apiErr.Msg, "the policy no longer has the rule that held this call") {
		t.Fatalf("approving under a changed rule: %v", err)
	}
	_, env = callE2E(t, c, "hostile__tick", `{"label":"refund","ms":80}`)
	now := pendingIDs(t, admin)
	if env["error_code"] != "approval_required" || len(now) != 2 || !strings.Contains(fmt.Sprint(env["message"]), now[1]) {
		t.Fatalf("the call under the edited rule: %v, pending %v", env, now)
	}
	if d := <-got; d.err != nil || d.event.Request.ID != now[1] {
		t.Fatalf("the new request's delivery: %+v", d)
	}
	if _, err := admin.Approve(context.Background(), now[1], "carol"); err != nil {
		t.Fatal(err)
	}
	if _, env = callE2E(t, c, "hostile__tick", `{"label":"refund","ms":80}`); env["ok"] != true {
		t.Fatalf("the call approved under the rule in force: %v", env)
	}
	// Both requests were delivered (the first after a retry): /metrics counts each delivery's end once
	// the notifier has it, which is after the receiver answered.
	metricsAPI := httptest.NewServer(gw.AdminHandler())
	defer metricsAPI.Close()
	const deliveredTwice = `toolgate_approval_webhooks_total{result="delivered",webhook="approvals.rules[0].webhooks[0]"} 2`
	redistest.WaitFor(t, func() bool {
		_, body := scrape(t, metricsAPI, "/metrics", adminKey)
		return strings.Contains(body, deliveredTwice)
	})
	if _, body := scrape(t, metricsAPI, "/metrics", adminKey); strings.Contains(body, `result="failed"`) || strings.Contains(body, receiver.URL) {
		t.Errorf("metrics count a failure, or name the webhook's URL:\n%s", grepLines(body, "toolgate_approval_webhooks"))
	}
}

// The attack: an agent's held call carries a secret (a token in a note, a field the audit trail
// redacts) and the webhook posts it to Slack and to a receiver, third parties that keep it. With
// audit.include_args, deliveries carry the arguments as the audit trail writes them: audit.redact's
// fields replaced, and every secret redaction recognises replaced; the digest is still the exact
// arguments', which the approval is bound to, and the console link shows them whole.
func TestApprovalWebhookLeaksNoSecretArguments(t *testing.T) {
	const secret = "whsec_test_0123456789"
	const token = "ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"
	t.Setenv("TOOLGATE_TEST_HOOK_SECRET", secret)
	got := make(chan []byte, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
	}))
	defer receiver.Close()
	servers := stdioUpstream(t, "hostile", "")
	cfg := writeConfig(t, servers)
	write(t, cfg, mustRead(t, cfg)+fmt.Sprintf(`admin: {key_sha256: %q}
audit: {include_args: true, redact: [ms]}
console:
  public_url: https://admin.example.com
approvals:
  rules:
    - tools: ["hostile/tick"]
      webhooks:
        - {url: %q, secret: "${TOOLGATE_TEST_HOOK_SECRET}", egress: {allow: [loopback]}}
        - {url: %q, format: slack, egress: {allow: [loopback]}}
`, authn.HashKey(adminKey), receiver.URL+"/json", receiver.URL+"/slack"))
	write(t, filepath.Join(filepath.Dir(cfg), "policy.csv"), testPolicy(servers)+"a, caller, hostile/tick, call, label != ''\n")
	url, logs, gw := httpGatewayFull(t, cfg)
	c := connectHTTP(t, url, aliceKey)

	if _, env := callE2E(t, c, "hostile__tick", `{"label":"refund to `+token+`","ms":80}`); env["error_code"] != "approval_required" {
		t.Fatalf("held call: %v", env)
	}
	pending, err := gw.Approvals().List(approvals.StatePending)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending: %v, %v", pending, err)
	}
	for range 2 {
		body := <-got
		if strings.Contains(string(body), token) {
			t.Errorf("the token left the gateway: %s\nlog:\n%s", body, logs)
		}
		var slack struct {
			Blocks []struct{ Text struct{ Text string } }
		}
		if err := json.Unmarshal(body, &slack); err == nil && len(slack.Blocks) > 0 {
			shown := slack.Blocks[0].Text.Text
			if !strings.Contains(shown, `"label": "refund to [redacted:github_token]"`) || !strings.Contains(shown, `"ms": "[redacted]"`) ||
				!strings.Contains(string(body), "https://admin.example.com/ui/approvals?id="+pending[0].ID) {
				t.Errorf("Slack message: %s", body)
			}
			continue
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Fatal(err)
		}
		if string(ev.Request.Arguments) != `{"label":"refund to [redacted:github_token]","ms":"[redacted]"}` || ev.Request.ArgsSHA256 != pending[0].ArgsHash {
			t.Errorf("event: %s (request's digest %s)", body, pending[0].ArgsHash)
		}
	}
}
