package authn

import (
	"github.com/toolgate/toolgate/internal/testkit"

	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	issuer   = "https://idp.example.com/"
	resource = "https://gw.example.com/mcp"
	metaURL  = "https://gw.example.com/.well-known/oauth-protected-resource/mcp"

	aliceKey = "tg_alice_key_for_tests" // an API key, configured by hash
)

// now is the fixed time every test clock returns.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

// testKeys are generated once: RSA generation is slow enough to matter under -race.
type testKeys struct {
	rsa, otherRSA, encRSA *rsa.PrivateKey
	ed                    ed25519.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	gen := func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return testKeys{rsa: gen(), otherRSA: gen(), encRSA: gen(), ed: ed}
})

// jwk describes one public key of a test key set.
type jwk struct {
	kid string
	alg jwkset.ALG
	use jwkset.USE
	key any // a public key
}

// defaultJWKS is the usual key set: an RS256 key, an EdDSA key, and an encryption key that must never
// verify a signature.
func defaultJWKS() []jwk {
	k := keys()
	return []jwk{
		{kid: "rsa-1", alg: jwkset.AlgRS256, key: &k.rsa.PublicKey},
		{kid: "ed-1", alg: jwkset.AlgEdDSA, key: k.ed.Public()},
		{kid: "enc-1", use: jwkset.UseEnc, key: &k.encRSA.PublicKey},
	}
}

func jwksJSON(t testing.TB, set []jwk) []byte {
	t.Helper()
	ctx := context.Background()
	store := jwkset.NewMemoryStorage()
	for _, k := range set {
		j, err := jwkset.NewJWKFromKey(k.key, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: k.alg, USE: k.use}})
		if err != nil {
			t.Fatal(err)
		}
		if err := store.KeyWrite(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := store.JSONPublic(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// jwksServer serves a key set on loopback and counts how often it is fetched.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int64
	body    atomic.Pointer[[]byte]
	status  atomic.Int64 // 0 means 200
}

func newJWKSServer(t testing.TB, set []jwk) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.serve(t, set)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.fetches.Add(1)
		if code := s.status.Load(); code != 0 {
			http.Error(w, "unavailable", int(code))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(*s.body.Load())
	}))
	t.Cleanup(s.Close)
	return s
}

// serve replaces the key set the server answers with (a key rotation).
func (s *jwksServer) serve(t testing.TB, set []jwk) {
	b := jwksJSON(t, set)
	s.body.Store(&b)
}

// jwtOptions is a JWT setup against jwksURL, every other JWT field left at its default; mod adjusts it.
func jwtOptions(jwksURL string, mod func(*Options)) Options {
	o := Options{
		Resource: resource,
		APIKeys: []APIKey{
			{Principal: "alice", SHA256: HashKey(aliceKey), Attributes: map[string]string{"region": "eu"}},
		},
		JWT: &JWTOptions{
			Issuer:          issuer,
			JWKSURL:         jwksURL,
			RolesClaim:      "realm_access.roles",
			AttributeClaims: []string{"region"},
		},
	}
	if mod != nil {
		mod(&o)
	}
	return o
}

// logBuffer is the shared concurrent log sink.
type logBuffer = testkit.LogBuffer

// withClock makes token time checks (exp, nbf, iat) use now instead of time.Now, so that tests need not
// sleep.
func withClock(now func() time.Time) Option {
	return func(s *settings) { s.now = now }
}

// newAuth builds an Authenticator on the fixed clock, closed when the test ends, and returns its log.
func newAuth(t testing.TB, o Options, opts ...Option) (*Authenticator, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	a, err := New(context.Background(), o, slog.New(slog.NewTextHandler(logs, nil)), append([]Option{withClock(clock)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	return a, logs
}

// claims are those of a valid token for alice; mod changes them.
func claims(mod func(jwt.MapClaims)) jwt.MapClaims {
	c := jwt.MapClaims{
		"iss":          issuer,
		"aud":          resource,
		"sub":          "alice",
		"iat":          now.Unix(),
		"exp":          now.Add(5 * time.Minute).Unix(),
		"realm_access": map[string]any{"roles": []any{"viewer", "support_agent"}},
		"region":       "eu",
	}
	if mod != nil {
		mod(c)
	}
	return c
}

// sign makes a token with method and key; kid "" leaves the header out. hdr adds header parameters.
func sign(t testing.TB, method jwt.SigningMethod, key any, kid string, c jwt.MapClaims, hdr map[string]any) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	for k, v := range hdr {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rs256 is a valid RS256 token from the usual key, with modified claims.
func rs256(t testing.TB, mod func(jwt.MapClaims)) string {
	return sign(t, jwt.SigningMethodRS256, keys().rsa, "rsa-1", claims(mod), nil)
}

// request is a POST to /mcp with the given Authorization header values and query.
func request(query string, authorization ...string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp"+query, nil)
	for _, v := range authorization {
		r.Header.Add("Authorization", v)
	}
	return r
}

func bearer(token string) string { return "Bearer " + token }

// failure asserts err is a *Failure and returns it.
func failure(t testing.TB, err error) *Failure {
	t.Helper()
	f, ok := err.(*Failure)
	if !ok {
		t.Fatalf("error is %T (%v), want *Failure", err, err)
	}
	return f
}
