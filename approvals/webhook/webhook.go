// Package webhook tells people that a call waits for their approval: when the gateway holds a call
// and creates a request (approvals.Guard.OnCreated), each webhook of the approval rule that applies
// (approvals.rules[].webhooks) receives a POST, in the background, so the held call never waits for
// a receiver. A delivery is signed (Sign, Verify) and retried with exponential backoff on network
// errors, 5xx, 408 and 429, a bounded number of times; the body is toolgate's own JSON event or a
// Slack incoming-webhook message, each with a link to the request in the console. A receiver is a
// third party: of the call's arguments it gets only what Options.Arguments lets out (redacted).
// Deliveries connect through an egress guard per hook (package upstreams/egress), as upstreams do,
// and never through a proxy the environment names.
//
// It is a package of its own beside approvals because it is the only part of approvals that talks to
// the network on its own, with goroutines, queues and a client to close.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/upstreams/egress"
)

// Formats of a Hook's body.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
)

// Hook is one receiver.
type Hook struct {
	Name    string // where it is configured, for logs: "approvals.rules[0].webhooks[1]"
	URL     string // never logged (a Slack URL is its credential): logs name the host
	Secret  string // signs each delivery; never logged
	Payload string // its body: FormatJSON ("" too) or FormatSlack (approvals.rules[].webhooks[].format)
	// Egress is what its deliveries may connect to: every connection is dialled through an egress
	// guard with these settings, so a URL that leads to the cloud metadata service, or to loopback
	// or the internal network unless Allow opens it, is refused as an upstream's would be. The zero
	// value allows public addresses only.
	Egress egress.Options
	// Proxy, optional, is the HTTP proxy its deliveries go through; the guard then checks the
	// proxy's address. "": they connect directly, whatever HTTP_PROXY and HTTPS_PROXY say. Never
	// logged (it may hold a password).
	Proxy string
}

// Format prints a Hook as its name and host, whatever the verb (%v, %+v, %#v, %s): its URL may be a
// credential and its secret is one, so neither is ever printed.
func (h Hook) Format(f fmt.State, _ rune) { _, _ = fmt.Fprintf(f, "%s (%s)", h.Name, host(h.URL)) }

// LogValue is the same for slog.
func (h Hook) LogValue() slog.Value { return slog.StringValue(fmt.Sprintf("%v", h)) }

// Defaults of Options.
const (
	DefaultAttempts   = 6                // one delivery and 5 retries: after 1, 2, 4, 8 and 16 s (31 s in all)
	DefaultBackoff    = time.Second      // the first retry's wait; each next one doubles, with ±20% jitter
	DefaultMaxBackoff = 30 * time.Second // no wait is longer
	DefaultTimeout    = 10 * time.Second // one attempt, connection to the end of the answer's headers
	DefaultMaxPending = 1024             // deliveries queued or being retried at once; beyond, new ones are dropped (logged)
)

// Options configure a Notifier; zero values take the defaults above.
type Options struct {
	// Rules are the hooks of each approval rule, by the rule's index (approvals.Rules).
	Rules [][]Hook
	// ConsoleURL is the console's public base URL (console.public_url); "" leaves the link out.
	ConsoleURL string
	// Arguments is what a delivery carries of the held call's arguments: a receiver is a third party
	// (Slack), so the gateway gives what the audit trail would write (docs/console.md,
	// "Notifications"). It runs once per request, in the background. nil, or a nil result: no
	// arguments, only their digest and the link to the console, where approvers see them whole.
	Arguments func(json.RawMessage) json.RawMessage
	// Client, when set, makes every delivery (tests); nil: each Hook gets a client of its own that
	// dials through its egress guard (Hook.Egress, Hook.Proxy), with Timeout per attempt.
	Client     *http.Client
	Log        *slog.Logger
	Attempts   int
	Backoff    time.Duration
	MaxBackoff time.Duration
	Timeout    time.Duration
	MaxPending int
	Now        func() time.Time // the signature's timestamp and the event's time; nil: time.Now
	// Delivered, optional, is told of each delivery's end: delivered or given up (for metrics and
	// tests).
	Delivered func(Result)
}

// Result is how one delivery ended.
type Result struct {
	Hook      string // Hook.Name
	Request   string // the request's id
	Delivered bool
	Dropped   bool // never sent: MaxPending deliveries were queued or retrying
	Attempts  int
	Status    int // the last answer's status; 0 when there was none
	Err       string
}

// Notifier delivers. Created never blocks; Close stops the deliveries still running (their retries
// are abandoned, and logged).
type Notifier struct {
	o      Options
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // one per delivery queued or running: bounds them at MaxPending
	// clients are each hook's, by rule and hook as in Options.Rules.
	clients [][]*http.Client

	mu     sync.Mutex // orders Created's wg.Add before Close's wg.Wait
	closed bool
}

// New starts a Notifier. It starts no goroutine until a request is created.
func New(o Options) *Notifier {
	o.Attempts = cmp.Or(o.Attempts, DefaultAttempts)
	o.Backoff = cmp.Or(o.Backoff, DefaultBackoff)
	o.MaxBackoff = cmp.Or(o.MaxBackoff, DefaultMaxBackoff)
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	o.MaxPending = cmp.Or(o.MaxPending, DefaultMaxPending)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{o: o, ctx: ctx, cancel: cancel, slots: make(chan struct{}, o.MaxPending)}
	for _, hooks := range o.Rules {
		clients := make([]*http.Client, len(hooks))
		for i, h := range hooks {
			clients[i] = o.Client
			if clients[i] == nil {
				clients[i] = hookClient(h, o.Timeout)
			}
		}
		n.clients = append(n.clients, clients)
	}
	return n
}

// hookClient is h's client: every connection dialled through h's egress guard, to the receiver or
// to h.Proxy, never through a proxy of the environment's (through one, the guard could not check
// where the connection ends). Redirects are not followed: the receiver is the URL the operator
// configured, and a redirect would carry the body and its signature to wherever it points. A 3xx is
// a failure that is not retried.
func hookClient(h Hook, timeout time.Duration) *http.Client {
	t := egress.New(h.Egress).Transport()
	if h.Proxy != "" {
		if u, err := url.Parse(h.Proxy); err == nil {
			t.Proxy = http.ProxyURL(u)
		}
	}
	return &http.Client{Timeout: timeout, Transport: t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Created queues the deliveries of req to the hooks of rule (its index in Options.Rules; -1 or a rule
// without hooks: nothing). It returns at once.
func (n *Notifier) Created(req approvals.Request, rule int) {
	if n == nil || rule < 0 || rule >= len(n.o.Rules) {
		return
	}
	args := sync.OnceValue(func() json.RawMessage { return n.arguments(req.Args) }) // once for all the rule's hooks
	for i, h := range n.o.Rules[rule] {
		select {
		case n.slots <- struct{}{}:
		default:
			n.o.Log.Warn("approval webhook not sent: too many deliveries pending", "webhook", h.Name, "approval", req.ID, "pending", n.o.MaxPending)
			n.report(Result{Hook: h.Name, Request: req.ID, Dropped: true, Err: "too many deliveries pending"})
			continue
		}
		if !n.start() {
			<-n.slots
			return
		}
		go func() {
			defer n.wg.Done()
			defer func() { <-n.slots }()
			n.deliver(h, n.clients[rule][i], req, args(), req.ID+"."+strconv.Itoa(rule)+"."+strconv.Itoa(i))
		}()
	}
}

// arguments are what deliveries carry of args (Options.Arguments): nil for none.
func (n *Notifier) arguments(args json.RawMessage) json.RawMessage {
	if n.o.Arguments == nil {
		return nil
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return n.o.Arguments(args)
}

// Close abandons the deliveries still running (a wait between retries ends at once; an attempt in
// flight is cancelled) and waits for their goroutines.
func (n *Notifier) Close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	n.closed = true
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	for _, clients := range n.clients {
		for _, c := range clients {
			c.CloseIdleConnections() // no keep-alive connection outlives the gateway
		}
	}
}

// start counts one more delivery goroutine, unless the Notifier is closed: a delivery begun after
// Close would outlive it.
func (n *Notifier) start() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	n.wg.Add(1)
	return true
}

// deliver posts req to h until it is accepted (2xx), refused for good (another 4xx), or Attempts run
// out. Every attempt is signed afresh, so the timestamp is the attempt's.
func (n *Notifier) deliver(h Hook, client *http.Client, req approvals.Request, args json.RawMessage, delivery string) {
	body, err := n.body(h, req, args, delivery)
	if err != nil {
		n.o.Log.Error("approval webhook not sent: body not built", "webhook", h.Name, "approval", req.ID, "err", err)
		n.report(Result{Hook: h.Name, Request: req.ID, Err: "body not built: " + err.Error()})
		return
	}
	res := Result{Hook: h.Name, Request: req.ID}
	wait := n.o.Backoff
	for res.Attempts < n.o.Attempts {
		res.Attempts++
		status, err := n.post(h, client, body, delivery)
		res.Status, res.Err = status, ""
		switch {
		case err == nil && status/100 == 2:
			res.Delivered = true
			n.o.Log.Info("approval webhook delivered", "webhook", h.Name, "host", host(h.URL), "approval", req.ID, "attempts", res.Attempts)
			n.report(res)
			return
		case err != nil:
			res.Err = err.Error()
		default:
			res.Err = "HTTP " + strconv.Itoa(status)
		}
		if err == nil && !retryable(status) {
			break
		}
		if _, refused := egress.IsRefused(err); refused {
			break // the address is not allowed: a retry would be refused the same way
		}
		if res.Attempts == n.o.Attempts {
			break
		}
		n.o.Log.Warn("approval webhook failed; retrying", "webhook", h.Name, "host", host(h.URL), "approval", req.ID,
			"attempt", res.Attempts, "err", res.Err, "retry_in", wait.Round(time.Millisecond).String())
		if !n.sleep(jitter(wait)) {
			res.Err = "abandoned: the gateway is stopping"
			break
		}
		wait = min(2*wait, n.o.MaxBackoff)
	}
	n.o.Log.Error("approval webhook given up", "webhook", h.Name, "host", host(h.URL), "approval", req.ID,
		"attempts", res.Attempts, "err", res.Err)
	n.report(res)
}

// retryable: the receiver may take it later (overloaded, down, timed out); any other 4xx says it
// never will.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

func (n *Notifier) post(h Hook, client *http.Client, body []byte, delivery string) (int, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.o.Timeout)
	defer cancel()
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return 0, errNoURL // the URL itself may be a credential: never in an error
	}
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("User-Agent", "toolgate-webhook/1")
	r.Header.Set(HeaderEvent, EventRequested)
	r.Header.Set(HeaderDelivery, delivery)
	if h.Secret != "" {
		r.Header.Set(HeaderSignature, Sign([]byte(h.Secret), n.o.Now(), body))
	}
	resp, err := client.Do(r)
	if err != nil {
		return 0, scrub(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	return resp.StatusCode, nil
}

var errNoURL = fmt.Errorf("the webhook's URL is not valid")

// scrub drops the URL from a client error (*url.Error quotes it: a Slack URL is a credential).
func scrub(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return fmt.Errorf("%s: %w", ue.Op, ue.Err)
	}
	return err
}

func host(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}

// sleep waits d, or until Close; false when closed.
func (n *Notifier) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-n.ctx.Done():
		return false
	}
}

// jitter spreads retries of many deliveries to one receiver by ±20%.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

func (n *Notifier) report(r Result) {
	if n.o.Delivered != nil {
		n.o.Delivered(r)
	}
}
