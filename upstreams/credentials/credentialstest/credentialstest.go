// Package credentialstest runs a real authorization server for tests of upstream credentials: zitadel/oidc's
// OpenID Provider (pkg/op, on the in-memory storage of its example server), serving client credentials and
// RFC 8693 token exchange on 127.0.0.1:0 and issuing JWT access tokens, so a test can read who a token is
// for and its audience, and a gateway can verify callers' JWTs against its key set (/keys).
package credentialstest

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2/clientcredentials"
)

// AuthServer is the running authorization server. It records the form of every token request (never
// printed). Its clients: GatewayID (client credentials and token exchange), and alice and bob, whose
// client-credentials tokens (UserToken) stand for the JWTs callers present.
type AuthServer struct {
	t      testing.TB
	srv    *httptest.Server
	issuer string
	store  *asStorage

	mu       sync.Mutex
	requests []url.Values
	down     bool
	downHits int // requests answered 503 while down
}

// asClient is one client of the authorization server: its secret and the grants it may use.
type asClient struct {
	*storage.Client
	secret string
	grants []oidc.GrantType
}

func (c *asClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *asClient) GrantTypes() []oidc.GrantType        { return c.grants }

// asStorage is the example storage with the clients the tests need, JWT access tokens, and token
// exchange without the example's impersonation rules.
type asStorage struct {
	*storage.Storage
	clients  map[string]*asClient
	lifetime time.Duration
}

type formKey struct{}

func (s *asStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if c, ok := s.clients[id]; ok {
		return c, nil
	}
	return nil, errors.New("client not found")
}

func (s *asStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if c, ok := s.clients[id]; ok && c.secret == secret {
		return nil
	}
	return errors.New("invalid client")
}

func (s *asStorage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if err := s.AuthorizeClientIDSecret(ctx, id, secret); err != nil {
		return nil, err
	}
	return s.clients[id], nil
}

// ClientCredentialsTokenRequest gives the token the audience and resource the request named (the
// example storage ignores both).
func (s *asStorage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	form, _ := ctx.Value(formKey{}).(url.Values)
	aud := append(append([]string{}, form["audience"]...), form["resource"]...)
	return &oidc.JWTTokenRequest{Subject: id, Audience: aud, Scopes: scopes}, nil
}

func (s *asStorage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	if r.GetRequestedTokenType() == "" {
		r.SetRequestedTokenType(oidc.AccessTokenType)
	}
	r.SetCurrentScopes(r.GetScopes())
	return nil
}

// CreateAccessToken shortens the example's five-minute tokens when the test asks.
func (s *asStorage) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	id, exp, err := s.Storage.CreateAccessToken(ctx, r)
	if s.lifetime > 0 {
		exp = time.Now().Add(s.lifetime)
	}
	return id, exp, err
}

// The gateway's client at the test authorization server.
const (
	GatewayID     = "toolgate"
	GatewaySecret = "gw-secret-ZW5jb2RlZA"
)

// Start runs the server until the test ends.
func Start(t testing.TB) *AuthServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	as := &AuthServer{t: t, issuer: "http://" + ln.Addr().String()}
	cc := []oidc.GrantType{oidc.GrantTypeClientCredentials}
	clients := map[string]*asClient{
		GatewayID: {Client: storage.WebClient(GatewayID, GatewaySecret, "http://127.0.0.1/cb"), secret: GatewaySecret,
			grants: []oidc.GrantType{oidc.GrantTypeClientCredentials, oidc.GrantTypeTokenExchange}},
		"alice": {Client: storage.WebClient("alice", "alice-secret", "http://127.0.0.1/cb"), secret: "alice-secret", grants: cc},
		"bob":   {Client: storage.WebClient("bob", "bob-secret", "http://127.0.0.1/cb"), secret: "bob-secret", grants: cc},
	}
	as.store = &asStorage{Storage: storage.NewStorageWithClients(storage.NewUserStore(as.issuer), nil), clients: clients}
	var key [32]byte
	_, _ = rand.Read(key[:])
	provider, err := op.NewProvider(&op.Config{CryptoKey: key, AuthMethodPost: true}, as.store, op.StaticIssuer(as.issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	as.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.record(provider)}}
	as.srv.Start()
	t.Cleanup(as.srv.Close)
	return as
}

// record keeps the form of every token request and serves 503 while the server is "down".
func (as *AuthServer) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		as.mu.Lock()
		down := as.down
		as.mu.Unlock()
		if down {
			as.mu.Lock()
			as.downHits++
			as.mu.Unlock()
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/oauth/token" {
			_ = r.ParseForm()
			as.mu.Lock()
			as.requests = append(as.requests, r.PostForm)
			as.mu.Unlock()
			r = r.WithContext(context.WithValue(r.Context(), formKey{}, r.PostForm))
		}
		next.ServeHTTP(w, r)
	})
}

// TokenURL is the token endpoint.
func (as *AuthServer) TokenURL() string { return as.issuer + "/oauth/token" }

// Issuer is the iss of the tokens it issues.
func (as *AuthServer) Issuer() string { return as.issuer }

// JWKSURL is where its signing keys are.
func (as *AuthServer) JWKSURL() string { return as.issuer + "/keys" }

// Grants counts the token requests of grant type g so far.
func (as *AuthServer) Grants(g string) int {
	as.mu.Lock()
	defer as.mu.Unlock()
	n := 0
	for _, f := range as.requests {
		if f.Get("grant_type") == g {
			n++
		}
	}
	return n
}

// Count is the number of token requests so far.
func (as *AuthServer) Count() int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return len(as.requests)
}

// LastRequest is the form of the last token request.
func (as *AuthServer) LastRequest() url.Values {
	as.mu.Lock()
	defer as.mu.Unlock()
	if len(as.requests) == 0 {
		return nil
	}
	return as.requests[len(as.requests)-1]
}

// DownHits is the number of requests answered 503 while the server was down.
func (as *AuthServer) DownHits() int {
	as.mu.Lock()
	defer as.mu.Unlock()
	return as.downHits
}

// SetDown makes every request answer 503 (true) or be served again (false).
func (as *AuthServer) SetDown(down bool) {
	as.mu.Lock()
	as.down = down
	as.mu.Unlock()
}

// UserToken is an access token (a JWT) the server issues to caller id ("alice" or "bob"), with
// audience as its aud when given: the JWT a caller presents.
func (as *AuthServer) UserToken(id string, audience ...string) string {
	as.t.Helper()
	cfg := clientcredentials.Config{ClientID: id, ClientSecret: id + "-secret", TokenURL: as.TokenURL(), Scopes: []string{"openid"},
		EndpointParams: url.Values{"audience": audience}}
	tok, err := cfg.Token(context.Background())
	if err != nil {
		as.t.Fatalf("token for %s: %v", id, err)
	}
	return tok.AccessToken
}

// Claims reads a JWT's payload (the tests only look; the upstream in a deployment verifies).
func Claims(t testing.TB, jwt string) map[string]any {
	t.Helper()
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("not a JWT: %d parts", len(parts))
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// Audiences is a JWT's aud as a list.
func Audiences(c map[string]any) []string {
	switch a := c["aud"].(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, v := range a {
			s, _ := v.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}
