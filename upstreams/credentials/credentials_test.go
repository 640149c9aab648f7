package credentials

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.uber.org/goleak"

	"github.com/toolgate/toolgate/upstreams/credentials/credentialstest"
	"github.com/toolgate/toolgate/upstreams/egress"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// loopbackOK is the egress setting of every source here: the test authorization server listens on
// loopback, which the guard refuses unless allowed.
var loopbackOK = egress.Options{Allow: []egress.Class{egress.Loopback}}

// upstream is a Streamable HTTP MCP server on 127.0.0.1:0 with one tool, that records the
// Authorization header of every request it receives.
type upstream struct {
	url  string
	mu   sync.Mutex
	seen []string // Authorization of each request, in order
}

func startUpstream(t *testing.T) *upstream {
	t.Helper()
	s := server.NewMCPServer("protected", "1.0.0")
	s.AddTool(mcp.NewTool("ping"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("pong"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	u := &upstream{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, r.Header.Get("Authorization"))
		u.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		_ = h.Shutdown(context.Background())
		srv.Close()
	})
	u.url = srv.URL + "/mcp"
	return u
}

func (u *upstream) authorizations() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

type callerKey struct{}

func asCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

func callerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// authorizing is the hook upstreams puts in front of an HTTP upstream (upstreams/httpcap.go), in
// small: every request gets the source's Authorization, or is not sent.
type authorizing struct {
	src  *Source
	base http.RoundTripper
}

func (a authorizing) RoundTrip(r *http.Request) (*http.Response, error) {
	v, err := a.src.Authorization(r.Context())
	if err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", v)
	return a.base.RoundTrip(r)
}

// connect is an MCP client of u whose requests carry src's credentials.
func connect(t *testing.T, u *upstream, src *Source) *client.Client {
	t.Helper()
	base := &http.Transport{}
	var rt http.RoundTripper = base
	if src != nil {
		rt = authorizing{src: src, base: base}
	}
	tr, err := transport.NewStreamableHTTP(u.url, transport.WithHTTPBasicClient(&http.Client{Transport: rt}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		base.CloseIdleConnections()
	})
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return c
}

func call(ctx context.Context, c *client.Client) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = "ping"
	_, err := c.CallTool(ctx, req)
	return err
}

// logBuffer collects a source's log, to show no secret is in it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newSource(t *testing.T, o Options) (*Source, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	o.Log = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if o.Caller == nil {
		o.Caller = callerFrom
	}
	o.Egress = loopbackOK
	src, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src, logs
}

// noSecrets fails when any secret appears in text.
func noSecrets(t *testing.T, where, text string, secrets ...string) {
	t.Helper()
	for _, s := range append(secrets, credentialstest.GatewaySecret) {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%s carries a secret or token: %s", where, text)
		}
	}
}

func TestClientCredentialsFetchedOnceForConcurrentCalls(t *testing.T) {
	as := credentialstest.Start(t)
	up := startUpstream(t)
	src, logs := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(),
		ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret, Scopes: []string{"orders:read", "orders:write"},
		Audience: "orders-api", Resource: up.url})
	c := connect(t, up, src)

	var wg sync.WaitGroup
	var failed atomic.Int32
	for range 100 {
		wg.Go(func() {
			if err := call(context.Background(), c); err != nil {
				failed.Add(1)
				t.Log(err)
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d of 100 calls failed", failed.Load())
	}
	if n := as.Grants("client_credentials"); n != 1 {
		t.Errorf("the authorization server got %d client_credentials requests for 100 calls and a handshake, want 1", n)
	}
	f := as.LastRequest()
	if f.Get("resource") != up.url || f.Get("audience") != "orders-api" || f.Get("scope") != "orders:read orders:write" {
		t.Errorf("token request: resource %q audience %q scope %q", f.Get("resource"), f.Get("audience"), f.Get("scope"))
	}
	if f.Get("client_secret") != "" {
		t.Error("the client secret went in the form; it belongs in the Authorization header (client_secret_basic)")
	}
	seen := up.authorizations()
	if len(seen) < 101 {
		t.Fatalf("the upstream saw %d requests, want at least 101", len(seen))
	}
	for _, a := range seen {
		if a != seen[0] || !strings.HasPrefix(a, "Bearer ") {
			t.Fatalf("the upstream saw Authorization %.20q and %.20q: one token should serve every request", seen[0], a)
		}
	}
	cl := credentialstest.Claims(t, strings.TrimPrefix(seen[0], "Bearer "))
	if cl["sub"] != credentialstest.GatewayID || !slices.Contains(credentialstest.Audiences(cl), up.url) || !slices.Contains(credentialstest.Audiences(cl), "orders-api") {
		t.Errorf("the upstream's token is for sub %v, aud %v; want %s and the upstream", cl["sub"], cl["aud"], credentialstest.GatewayID)
	}
	noSecrets(t, "the log", logs.String(), strings.TrimPrefix(seen[0], "Bearer "))
}

// clock is a settable time for the tests of expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestClientCredentialsRefreshedBeforeExpiry(t *testing.T) {
	as := credentialstest.Start(t)
	clk := &clock{now: time.Now()}
	src, _ := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(),
		ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret, Now: clk.Now})
	ctx := context.Background()
	first, err := src.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The example provider's tokens live five minutes: refreshed 30s before, given up 5s before.
	clk.add(4 * time.Minute)
	if again, err := src.Authorization(ctx); err != nil || again != first {
		t.Fatalf("within its life the token changed or failed: %v", err)
	}
	if n := as.Grants("client_credentials"); n != 1 {
		t.Fatalf("%d token requests within the token's life, want 1", n)
	}
	// Due for refresh, still valid: the caller gets the old token at once and one refresh runs.
	clk.add(40 * time.Second)
	if soon, err := src.Authorization(ctx); err != nil || soon != first {
		t.Fatalf("a token due for refresh but valid should still be used while it is refreshed: %v", err)
	}
	waitFor(t, func() bool { return as.Grants("client_credentials") == 2 })
	// Expired: a new one.
	clk.add(time.Minute)
	next, err := src.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if next == first {
		t.Error("after expiry the old token was used")
	}
	if n := as.Grants("client_credentials"); n > 3 {
		t.Errorf("%d token requests, want at most 3", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func exchangeOptions(as *credentialstest.AuthServer, up *upstream) Options {
	return Options{Server: "orders", Mode: TokenExchange, TokenURL: as.TokenURL(), ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret,
		Audience: "orders-api", Resource: up.url, Scopes: []string{"orders:read"}}
}

func TestTokenExchangeGivesEachCallerTheirOwnToken(t *testing.T) {
	as := credentialstest.Start(t)
	up := startUpstream(t)
	src, logs := newSource(t, exchangeOptions(as, up))
	c := connect(t, up, src)
	alice, bob := as.UserToken("alice"), as.UserToken("bob")
	handshake := len(up.authorizations())

	aliceCtx := asCaller(context.Background(), Caller{Principal: "alice", Token: alice})
	bobCtx := asCaller(context.Background(), Caller{Principal: "bob", Token: bob})
	for range 3 {
		for _, ctx := range []context.Context{aliceCtx, bobCtx} {
			if err := call(ctx, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := as.Grants(GrantTypeTokenExchange); n != 2 {
		t.Errorf("%d token exchanges for two callers making three calls each, want 2 (cached per caller)", n)
	}
	f := as.LastRequest()
	if f.Get("subject_token_type") != TokenTypeAccessToken || f.Get("requested_token_type") != TokenTypeAccessToken ||
		f.Get("resource") != up.url || f.Get("audience") != "orders-api" || f.Get("scope") != "orders:read" {
		t.Errorf("exchange request: %v", []string{f.Get("subject_token_type"), f.Get("requested_token_type"), f.Get("resource"), f.Get("audience"), f.Get("scope")})
	}
	subs := map[string]string{} // sub -> token
	for _, a := range up.authorizations()[handshake:] {
		tok := strings.TrimPrefix(a, "Bearer ")
		if tok == alice || tok == bob {
			t.Fatal("the upstream saw a caller's inbound JWT")
		}
		cl := credentialstest.Claims(t, tok)
		sub, _ := cl["sub"].(string)
		if prev, ok := subs[sub]; ok && prev != tok {
			t.Errorf("%s's calls carried two tokens; the exchanged token should be cached", sub)
		}
		subs[sub] = tok
		if !slices.Contains(credentialstest.Audiences(cl), "orders-api") {
			t.Errorf("the exchanged token's audience is %v, not the upstream's", cl["aud"])
		}
	}
	if len(subs) != 2 || subs["alice"] == "" || subs["bob"] == "" || subs["alice"] == subs["bob"] {
		t.Errorf("the upstream saw the identities %v; want alice and bob with different tokens", mapsKeys(subs))
	}
	for _, a := range up.authorizations()[:handshake] {
		if sub := credentialstest.Claims(t, strings.TrimPrefix(a, "Bearer "))["sub"]; sub != credentialstest.GatewayID {
			t.Errorf("the handshake (no caller) went as %v, want the gateway's client %s", sub, credentialstest.GatewayID)
		}
	}
	noSecrets(t, "the log", logs.String(), alice, bob, subs["alice"], subs["bob"])
}

func mapsKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestTokenExchangeRefusesCallerWithoutJWT(t *testing.T) {
	as := credentialstest.Start(t)
	up := startUpstream(t)
	src, _ := newSource(t, exchangeOptions(as, up))
	c := connect(t, up, src)
	before, asked := len(up.authorizations()), as.Grants(GrantTypeTokenExchange)

	ctx := asCaller(context.Background(), Caller{Principal: "carol"}) // an API-key caller
	_, err := src.Authorization(ctx)
	var ce *Error
	if !errors.As(err, &ce) || !ce.Refused || !errors.Is(err, ErrNoSubjectToken) {
		t.Fatalf("an API-key caller got %v, want a refusal (Refused, ErrNoSubjectToken)", err)
	}
	if err := call(ctx, c); err == nil || !errors.Is(err, ErrNoSubjectToken) {
		t.Fatalf("the call of an API-key caller: %v", err)
	}
	if len(up.authorizations()) != before || as.Grants(GrantTypeTokenExchange) != asked {
		t.Error("a refused call reached the upstream or the authorization server")
	}

	// With fallback: client_credentials, the same caller goes as the gateway.
	o := exchangeOptions(as, up)
	o.FallbackClientCredentials = true
	fb, _ := newSource(t, o)
	v, err := fb.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sub := credentialstest.Claims(t, strings.TrimPrefix(v, "Bearer "))["sub"]; sub != credentialstest.GatewayID {
		t.Errorf("the fallback token is for %v, want %s", sub, credentialstest.GatewayID)
	}
}

func TestAuthServerDown(t *testing.T) {
	as := credentialstest.Start(t)
	protected := startUpstream(t)
	open := startUpstream(t) // a static upstream: no auth block
	src, logs := newSource(t, exchangeOptions(as, protected))
	c := connect(t, protected, src)
	plain := connect(t, open, nil)
	alice := as.UserToken("alice")
	as.SetDown(true)
	before := len(protected.authorizations())

	ctx := asCaller(context.Background(), Caller{Principal: "alice", Token: alice})
	err := call(ctx, c)
	var ce *Error
	if !errors.As(err, &ce) || ce.Refused {
		t.Fatalf("with the authorization server down the call failed with %v, want a credentials *Error that is not a refusal", err)
	}
	if !strings.Contains(ce.Error(), "HTTP 503") || !strings.Contains(ce.Error(), `"orders"`) {
		t.Errorf("the error should name the upstream and what the token endpoint answered: %v", ce)
	}
	if len(protected.authorizations()) != before {
		t.Error("a request went to the upstream without a credential")
	}
	// Held back: a second call within a second does not ask the server again.
	asked := as.Count()
	if err := call(ctx, c); err == nil {
		t.Fatal("the second call succeeded with the server down")
	}
	if as.Count() != asked {
		t.Error("a failed fetch was repeated at once; it should be held back")
	}
	if err := call(context.Background(), plain); err != nil {
		t.Fatalf("another upstream stopped serving: %v", err)
	}
	logged := logs.String()
	if !strings.Contains(logged, "could not get a token") || !strings.Contains(logged, `"principal":"alice"`) {
		t.Errorf("no log line for the failed fetch: %s", logged)
	}
	noSecrets(t, "the log", logged, alice)
	noSecrets(t, "the error", err.Error(), alice)

	as.SetDown(false)
	time.Sleep(failureHoldoff)
	if err := call(ctx, c); err != nil {
		t.Fatalf("after the server came back: %v", err)
	}
}

func TestExchangedTokensCacheIsBounded(t *testing.T) {
	as := credentialstest.Start(t)
	up := startUpstream(t)
	o := exchangeOptions(as, up)
	o.MaxCached = 2
	src, _ := newSource(t, o)
	for i, who := range []string{"alice", "bob", "alice"} {
		tok := as.UserToken(who) // a new inbound token each time: a new cache key
		if _, err := src.Authorization(asCaller(context.Background(), Caller{Principal: fmt.Sprint(who, i), Token: tok})); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.cache.len(); n > 2 {
		t.Errorf("the cache holds %d tokens, bound 2", n)
	}
}

func TestRejectedTokenIsFetchedAgain(t *testing.T) {
	as := credentialstest.Start(t)
	src, _ := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(), ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret})
	ctx := context.Background()
	first, err := src.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	src.Rejected(ctx, first)
	if _, err := src.Authorization(ctx); err != nil {
		t.Fatal(err)
	}
	if n := as.Grants("client_credentials"); n != 2 {
		t.Errorf("%d token requests after a 401, want 2", n)
	}
}

func TestWrongClientSecretNamesNoSecret(t *testing.T) {
	as := credentialstest.Start(t)
	src, logs := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(), ClientID: credentialstest.GatewayID, ClientSecret: "wrong-secret-value"})
	_, err := src.Authorization(context.Background())
	var oe *OAuthError
	if !errors.As(err, &oe) || oe.Status != http.StatusUnauthorized && oe.Status != http.StatusBadRequest {
		t.Fatalf("got %v, want the token endpoint's refusal", err)
	}
	noSecrets(t, "the error", err.Error(), "wrong-secret-value")
	noSecrets(t, "the log", logs.String(), "wrong-secret-value")
}

// TestNoThunderingHerd: 100 callers arriving together at a source with no token yet make one token
// request (client credentials), and 100 calls of one caller one exchange.
func TestNoThunderingHerd(t *testing.T) {
	as := credentialstest.Start(t)
	up := startUpstream(t)
	cc, _ := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(), ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret})
	te, _ := newSource(t, exchangeOptions(as, up))
	alice := as.UserToken("alice")
	ctx := asCaller(context.Background(), Caller{Principal: "alice", Token: alice})
	for _, src := range []*Source{cc, te} {
		start := make(chan struct{})
		values := make(chan string, 100)
		var wg sync.WaitGroup
		for range 100 {
			wg.Go(func() {
				<-start
				v, err := src.Authorization(ctx)
				if err != nil {
					t.Error(err)
				}
				values <- v
			})
		}
		close(start)
		wg.Wait()
		close(values)
		first := <-values
		for v := range values {
			if v != first {
				t.Fatal("concurrent callers got different tokens")
			}
		}
	}
	if m := as.Grants(GrantTypeTokenExchange); m != 1 {
		t.Errorf("100 concurrent calls of one caller made %d token exchanges, want 1", m)
	}
	if n := as.Grants("client_credentials"); n != 2 { // alice's own token, and the gateway's once
		t.Errorf("100 concurrent calls made %d client_credentials requests (with alice's own), want 2", n)
	}
}

// TestDueTokenServesWhileServerDown: a token due for refresh but still valid keeps serving while the
// authorization server is down, and the refresh is tried once per holdoff, not once per call.
func TestDueTokenServesWhileServerDown(t *testing.T) {
	as := credentialstest.Start(t)
	clk := &clock{now: time.Now()}
	src, _ := newSource(t, Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(),
		ClientID: credentialstest.GatewayID, ClientSecret: credentialstest.GatewaySecret, Now: clk.Now})
	ctx := context.Background()
	first, err := src.Authorization(ctx)
	if err != nil {
		t.Fatal(err)
	}
	as.SetDown(true)
	clk.add(4*time.Minute + 40*time.Second) // due (4m30s), not expired (4m55s)
	for range 50 {
		v, err := src.Authorization(ctx)
		if err != nil || v != first {
			t.Fatalf("a due but valid token should serve while the server is down: %v", err)
		}
		waitFor(t, func() bool { src.gw.mu.Lock(); defer src.gw.mu.Unlock(); return src.gw.flight == nil })
	}
	if n := as.DownHits(); n != 1 {
		t.Errorf("the server was asked %d times in one holdoff, want 1", n)
	}
	clk.add(20 * time.Second) // expired
	if _, err := src.Authorization(ctx); err == nil {
		t.Error("an expired token was used")
	}
}

// TestTokenEndpointGoesThroughTheEgressGuard: the token endpoint's client dials through the upstream's
// egress guard, so a token_url on loopback is refused without a request unless egress allows loopback.
func TestTokenEndpointGoesThroughTheEgressGuard(t *testing.T) {
	as := credentialstest.Start(t)
	src, err := New(Options{Server: "orders", Mode: ClientCredentials, TokenURL: as.TokenURL(), ClientID: credentialstest.GatewayID,
		ClientSecret: credentialstest.GatewaySecret})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = src.Authorization(context.Background())
	if r, ok := egress.IsRefused(err); !ok || r.Class != egress.Loopback {
		t.Fatalf("Authorization = %v, want the egress guard's refusal of a loopback address", err)
	}
	if n := as.Count(); n != 0 {
		t.Errorf("the authorization server got %d requests", n)
	}
}
