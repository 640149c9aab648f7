// Package testoidc runs a real OpenID Provider for tests of sign-in with the authorization code flow
// and PKCE: zitadel/oidc's example provider (pkg/op on its in-memory example storage, with its login
// page), on 127.0.0.1:0. Its one client accepts any loopback redirect URI ending in
// /ui/oidc/callback, so a gateway listening on a port of its own choosing can use it. Its users sign
// in with a user name and password on the provider's page, as a person would in a browser.
package testoidc

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// The provider's client and its users.
const (
	ClientID     = "toolgate-console"
	ClientSecret = "console-secret-dGVzdA"
	Password     = "correct horse battery staple"
)

// User is one person who can sign in: Username is also their preferred_username, ID their sub.
type User struct {
	ID, Username, Email string
	EmailVerified       bool
}

// Provider is the running OpenID Provider.
type Provider struct {
	srv    *httptest.Server
	issuer string
	tokens atomic.Int32
}

// Issuer is the provider's issuer URL (discovery is under it).
func (p *Provider) Issuer() string { return p.issuer }

// TokenRequests counts the requests to the token endpoint.
func (p *Provider) TokenRequests() int { return int(p.tokens.Load()) }

// users is storage.UserStore over the test's users.
type users map[string]*storage.User

func (u users) GetUserByID(id string) *storage.User { return u[id] }
func (u users) GetUserByUsername(name string) *storage.User {
	for _, x := range u {
		if x.Username == name {
			return x
		}
	}
	return nil
}
func (u users) ExampleClientID() string { return storage.ServiceUserID }

// client is the example's web client (client secret, code flow) with its redirect URIs as globs.
type client struct{ *storage.Client }

func (client) RedirectURIGlobs() []string {
	return []string{"http://127.0.0.1:*/ui/oidc/callback", "http://localhost:*/ui/oidc/callback"}
}
func (client) PostLogoutRedirectURIGlobs() []string { return nil }

// store is the example storage serving the glob client.
type store struct {
	*storage.Storage
	c client
}

func (s *store) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	if id == ClientID {
		return s.c, nil
	}
	return s.Storage.GetClientByClientID(ctx, id)
}

// Start runs the provider until the test ends, with the users given (all with Password).
func Start(t testing.TB, people ...User) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{issuer: "http://" + ln.Addr().String()}
	us := users{}
	for _, x := range people {
		us[x.ID] = &storage.User{ID: x.ID, Username: x.Username, Password: Password, FirstName: x.Username, LastName: "Test",
			Email: x.Email, EmailVerified: x.EmailVerified, PreferredLanguage: language.English}
	}
	c := client{storage.WebClient(ClientID, ClientSecret, "http://127.0.0.1/ui/oidc/callback")}
	s := &store{Storage: storage.NewStorageWithClients(us, map[string]*storage.Client{ClientID: c.Client}), c: c}
	router := exampleop.SetupServer(p.issuer, s, nil, false)
	p.srv = &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			p.tokens.Add(1)
		}
		router.ServeHTTP(w, r)
	})}}
	p.srv.Start()
	t.Cleanup(p.srv.Close)
	return p
}
