package webhook

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/upstreams/egress"
)

var secret = []byte("s3cret-for-tests")

func heldRefund() approvals.Request {
	now := time.Now().UTC()
	return approvals.Request{ID: "apr_test1", Principal: "alice", Tool: "orders/refund_order",
		ArgsHash: "ab12", Args: json.RawMessage(`{"amount":80,"note":"<!channel> <https://evil|click>"}`),
		Rule: "/etc/toolgate/policy.csv:67", RuleDigest: "0123456789abcdef", PolicyVersion: "v1",
		State: approvals.StatePending, CreatedAt: now, ExpiresAt: now.Add(15 * time.Minute), Created: true}
}

// asIs lets a call's arguments out whole (the gateway's Options.Arguments redacts them).
func asIs(args json.RawMessage) json.RawMessage { return args }

// delivery is what the receiver got.
type delivery struct {
	header http.Header
	body   []byte
}

// receiver is a real HTTP server on 127.0.0.1:0 answering the statuses given, in order (200 after
// them), and sending what it received on got.
func receiver(t *testing.T, statuses ...int) (*httptest.Server, <-chan delivery) {
	t.Helper()
	got := make(chan delivery, 16)
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- delivery{header: r.Header.Clone(), body: body}
		mu.Lock()
		status := http.StatusOK
		if len(statuses) > 0 {
			status, statuses = statuses[0], statuses[1:]
		}
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// notifier delivers to hooks with millisecond backoffs and reports each end on the returned channel.
// The receivers of these tests are on loopback, which a hook must allow, as the config says
// egress: {allow: [loopback]}: a hook without egress settings gets that.
func notifier(t *testing.T, o Options, hooks ...Hook) (*Notifier, <-chan Result) {
	t.Helper()
	done := make(chan Result, 16)
	for i, h := range hooks {
		if h.Egress.Allow == nil && h.Egress.AllowPrefixes == nil && h.Egress.Resolver == nil && h.Egress.Dial == nil {
			hooks[i].Egress.Allow = []egress.Class{egress.Loopback}
		}
	}
	o.Rules = [][]Hook{hooks}
	o.Backoff = cmp.Or(o.Backoff, time.Millisecond)
	o.Delivered = func(r Result) { done <- r }
	n := New(o)
	t.Cleanup(n.Close)
	return n, done
}

func TestDeliveredSignedAndVerified(t *testing.T) {
	srv, got := receiver(t)
	n, done := notifier(t, Options{ConsoleURL: "https://admin.example.com/", Arguments: asIs}, Hook{Name: "approvals.rules[0].webhooks[0]", URL: srv.URL + "/hook", Secret: string(secret)})
	req := heldRefund()
	n.Created(req, 0)
	d := <-got
	if err := Verify(secret, d.header.Get(HeaderSignature), d.body, time.Now(), 0); err != nil {
		t.Fatalf("signature: %v (header %q)", err, d.header.Get(HeaderSignature))
	}
	if d.header.Get(HeaderEvent) != EventRequested || d.header.Get(HeaderDelivery) != "apr_test1.0.0" {
		t.Errorf("headers: %v", d.header)
	}
	var ev Event
	if err := json.Unmarshal(d.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Event != EventRequested || ev.Request.ID != req.ID || ev.Request.Principal != "alice" || ev.Request.Tool != req.Tool ||
		!bytes.Equal(ev.Request.Arguments, req.Args) || ev.Request.ArgsSHA256 != "ab12" || ev.Request.Rule != "policy.csv:67" ||
		ev.Request.RuleDigest != req.RuleDigest || !ev.Request.ExpiresAt.Equal(req.ExpiresAt) {
		t.Errorf("event: %s", d.body)
	}
	if ev.URL != "https://admin.example.com/ui/approvals?id=apr_test1" {
		t.Errorf("url = %q", ev.URL)
	}
	if r := <-done; !r.Delivered || r.Attempts != 1 || r.Status != 200 {
		t.Errorf("result %+v", r)
	}
}

// The held call must not wait for the receiver: Created returns while the receiver still holds the
// delivery.
func TestCreatedNeverBlocks(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	returned := make(chan struct{})
	go func() {
		n.Created(heldRefund(), 0)
		close(returned)
	}()
	<-returned // Created came back…
	<-arrived  // …while the receiver holds the delivery
	close(release)
	if r := <-done; !r.Delivered {
		t.Errorf("result %+v", r)
	}
}

func TestRetriedAfter500(t *testing.T) {
	srv, got := receiver(t, http.StatusInternalServerError, http.StatusBadGateway)
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: srv.URL, Secret: string(secret)})
	n.Created(heldRefund(), 0)
	var ids []string
	for range 3 {
		d := <-got
		if err := Verify(secret, d.header.Get(HeaderSignature), d.body, time.Now(), 0); err != nil {
			t.Errorf("retry not signed: %v", err)
		}
		ids = append(ids, d.header.Get(HeaderDelivery))
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("delivery ids differ between retries: %v", ids)
	}
	if r := <-done; !r.Delivered || r.Attempts != 3 || r.Status != 200 {
		t.Errorf("result %+v", r)
	}
}

func TestNotRetriedAfter400(t *testing.T) {
	srv, _ := receiver(t, http.StatusBadRequest)
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	if r := <-done; r.Delivered || r.Attempts != 1 || r.Status != 400 || r.Err != "HTTP 400" {
		t.Errorf("result %+v", r)
	}
}

func TestGivesUpAfterAttempts(t *testing.T) {
	srv, _ := receiver(t, 503, 503, 503, 503)
	n, done := notifier(t, Options{Attempts: 3}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	if r := <-done; r.Delivered || r.Attempts != 3 || r.Status != 503 {
		t.Errorf("result %+v", r)
	}
}

// Close ends a delivery waiting to retry at once, without waiting out its backoff.
func TestCloseAbandonsRetries(t *testing.T) {
	srv, got := receiver(t, 500)
	n, done := notifier(t, Options{Backoff: time.Hour}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	<-got
	n.Close()
	if r := <-done; r.Delivered || r.Err != "abandoned: the gateway is stopping" {
		t.Errorf("result %+v", r)
	}
}

func TestDroppedBeyondMaxPending(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release }))
	defer srv.Close()
	defer close(release)
	n, done := notifier(t, Options{MaxPending: 1}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	n.Created(heldRefund(), 0)
	if r := <-done; r.Delivered || !r.Dropped || r.Err != "too many deliveries pending" {
		t.Errorf("result %+v", r)
	}
}

func TestNoRuleNoHook(t *testing.T) {
	n, done := notifier(t, Options{}) // rule 0 has no hooks
	n.Created(heldRefund(), 0)
	n.Created(heldRefund(), -1)
	n.Created(heldRefund(), 7)
	n.Close()
	select {
	case r := <-done:
		t.Fatalf("a delivery without a hook: %+v", r)
	default:
	}
}

// A Slack URL is a credential: a failed delivery's log names the host, never the path.
func TestURLNeverLogged(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every attempt fails to connect
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	n, done := notifier(t, Options{Attempts: 2, Log: log}, Hook{Name: "h", URL: "http://" + addr + "/services/T000/B000/XXXXSECRETXXXX", Payload: FormatSlack})
	n.Created(heldRefund(), 0)
	r := <-done
	mu.Lock()
	defer mu.Unlock()
	if r.Delivered || strings.Contains(r.Err, "XXXXSECRET") || strings.Contains(logs.String(), "XXXXSECRET") {
		t.Errorf("the URL's secret path leaked: result %+v, log:\n%s", r, logs.String())
	}
	if !strings.Contains(logs.String(), "approval webhook given up") || !strings.Contains(logs.String(), addr) {
		t.Errorf("log does not say what failed where:\n%s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func TestSlackMessageEscapesTheRequest(t *testing.T) {
	srv, got := receiver(t)
	n, done := notifier(t, Options{ConsoleURL: "https://admin.example.com", Arguments: asIs}, Hook{Name: "h", URL: srv.URL, Payload: FormatSlack})
	n.Created(heldRefund(), 0)
	d := <-got
	<-done
	if d.header.Get(HeaderSignature) != "" {
		t.Errorf("signed without a secret: %q", d.header.Get(HeaderSignature))
	}
	var msg struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type     string            `json:"type"`
			Text     map[string]string `json:"text"`
			Elements []map[string]string
		} `json:"blocks"`
	}
	if err := json.Unmarshal(d.body, &msg); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.Text, "Approval needed: alice called orders/refund_order (held by policy.csv:67") ||
		!strings.HasSuffix(msg.Text, ": https://admin.example.com/ui/approvals?id=apr_test1") {
		t.Errorf("text = %q", msg.Text)
	}
	section := msg.Blocks[0].Text["text"]
	if strings.Contains(section, "<!channel>") || strings.Contains(section, "<https://evil") ||
		!strings.Contains(section, "&lt;!channel&gt; &lt;https://evil|click&gt;") {
		t.Errorf("arguments not escaped for Slack: %q", section)
	}
	if ctx := msg.Blocks[1].Elements[0]["text"]; !strings.Contains(ctx, "<https://admin.example.com/ui/approvals?id=apr_test1|Open in the console") {
		t.Errorf("context = %q", ctx)
	}
}

func TestVerifyRefusals(t *testing.T) {
	body := []byte(`{"event":"approval.requested"}`)
	now := time.Unix(1_800_000_000, 0)
	good := Sign(secret, now, body)
	for _, tc := range []struct {
		name   string
		header string
		body   []byte
		now    time.Time
		want   error
	}{
		{"good", good, body, now, nil},
		{"no header", "", body, now, ErrNoSignature},
		{"no timestamp", "v1=00", body, now, ErrNoSignature},
		{"body changed", good, []byte(`{"event":"approval.requested "}`), now, ErrBadMAC},
		{"timestamp changed", strings.Replace(good, "t=1800000000", "t=1800000001", 1), body, now, ErrBadMAC},
		{"other secret", Sign([]byte("other"), now, body), body, now, ErrBadMAC},
		{"replayed later", good, body, now.Add(6 * time.Minute), ErrStale},
		{"from the future", good, body, now.Add(-6 * time.Minute), ErrStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(secret, tc.header, tc.body, tc.now, 0); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// A receiver that redirects does not get the delivery sent on: the body and its signature stay with
// the URL the operator configured, and the 3xx is a failure that is not retried.
func TestRedirectNotFollowed(t *testing.T) {
	elsewhere, got := receiver(t)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusTemporaryRedirect)
	}))
	defer redirecting.Close()
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: redirecting.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	if r := <-done; r.Delivered || r.Attempts != 1 || r.Status != http.StatusTemporaryRedirect {
		t.Errorf("result %+v", r)
	}
	select {
	case d := <-got:
		t.Fatalf("the redirect was followed: %s", d.body)
	default:
	}
}

// A Hook printed or logged by mistake shows its name and host, never its URL's path, its secret or
// its proxy's password.
func TestHookNeverPrintsItsSecrets(t *testing.T) {
	h := Hook{Name: "approvals.rules[0].webhooks[0]", URL: "https://hooks.slack.com/services/T0/B0/XXXXSECRET", Secret: "whsec_YYYY",
		Proxy: "http://gw:XXXXSECRET@10.1.2.3:3128"}
	var logged bytes.Buffer
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("x", "hook", h)
	for _, out := range []string{fmt.Sprintf("%v", h), fmt.Sprintf("%+v", h), fmt.Sprintf("%#v", h), fmt.Sprint(h),
		fmt.Sprintf("%v", []Hook{h}), fmt.Sprintf("%+v", Options{Rules: [][]Hook{{h}}}), logged.String()} {
		if strings.Contains(out, "XXXXSECRET") || strings.Contains(out, "whsec_") || !strings.Contains(out, "approvals.rules[0].webhooks[0] (hooks.slack.com)") {
			t.Errorf("printed as %s", out)
		}
	}
}

// Created after Close starts no delivery: it returns without a goroutine (goleak checks the
// package) and reports nothing. A Close racing Created is covered by -race and goleak.
func TestCreatedAfterCloseStartsNothing(t *testing.T) {
	srv, got := receiver(t)
	n, done := notifier(t, Options{}, Hook{Name: "h", URL: srv.URL, Secret: "x"})
	racing := make(chan struct{})
	go func() {
		defer close(racing)
		for range 10 { // fewer than done holds: each report must find room
			n.Created(heldRefund(), 0)
		}
	}()
	n.Close()
	<-racing
	for len(done) > 0 { // the racing deliveries Close abandoned or that finished first
		<-done
	}
	n.Created(heldRefund(), 0)
	if len(n.slots) != 0 {
		t.Fatalf("%d deliveries pending after Close", len(n.slots))
	}
	select {
	case r := <-done:
		t.Fatalf("a delivery after Close: %+v", r)
	default:
	}
	_ = got
}

// A receiver is a third party: without Options.Arguments (the gateway leaves it out unless
// audit.include_args), a held call's arguments, a card number or a token among them, reach neither
// a JSON receiver nor Slack; the digest and the link to the console, where approvers see them, do.
func TestArgumentsNotSentToReceiversByDefault(t *testing.T) {
	srv, got := receiver(t)
	n, done := notifier(t, Options{ConsoleURL: "https://admin.example.com"},
		Hook{Name: "json", URL: srv.URL, Secret: "x"}, Hook{Name: "slack", URL: srv.URL, Payload: FormatSlack})
	req := heldRefund()
	req.Args = json.RawMessage(`{"card":"4111111111111111","token":"ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"}`)
	n.Created(req, 0)
	for range 2 {
		d := <-got
		<-done
		if bytes.Contains(d.body, []byte("4111111111111111")) || bytes.Contains(d.body, []byte("ghp_")) {
			t.Errorf("the arguments left the gateway: %s", d.body)
		}
		if d.header.Get(HeaderSignature) == "" { // slack
			if !bytes.Contains(d.body, []byte("The arguments are not sent here: open the request in the console to see them.")) {
				t.Errorf("the Slack message does not say where the arguments are: %s", d.body)
			}
			continue
		}
		var ev struct{ Request map[string]any }
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if _, has := ev.Request["arguments"]; has || ev.Request["args_sha256"] != req.ArgsHash {
			t.Errorf("event request: %v", ev.Request)
		}
	}
}

// Options.Arguments runs once per request, however many hooks the rule has, and what it returns
// is what every hook gets.
func TestArgumentsRedactedOncePerRequest(t *testing.T) {
	srv, got := receiver(t)
	var calls atomic.Int32
	redacted := func(json.RawMessage) json.RawMessage {
		calls.Add(1)
		return json.RawMessage(`{"amount":80,"note":"[redacted]"}`)
	}
	n, done := notifier(t, Options{Arguments: redacted}, Hook{Name: "a", URL: srv.URL, Secret: "x"}, Hook{Name: "b", URL: srv.URL, Secret: "x"})
	n.Created(heldRefund(), 0)
	for range 2 {
		d := <-got
		<-done
		var ev Event
		if err := json.Unmarshal(d.body, &ev); err != nil {
			t.Fatal(err)
		}
		if string(ev.Request.Arguments) != `{"amount":80,"note":"[redacted]"}` {
			t.Errorf("arguments = %s", ev.Request.Arguments)
		}
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("Arguments ran %d times for one request", c)
	}
}
