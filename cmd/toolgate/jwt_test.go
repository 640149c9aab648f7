package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testIssuer   = "https://idp.test/"
	testResource = "https://gw.test/mcp"
)

// jwtGateway runs the gateway with JWT auth against a JWKS file holding
// one fresh RSA key, and returns a token minter for that key.
func jwtGateway(t *testing.T) (string, func(claims jwt.MapClaims) string) {
	t.Helper()
	// "auditor" exists only through the token's roles claim.
	return jwtGatewayWith(t, "p, auditor, hostile/env, call, allow\n", "")
}

// jwtGatewayWith is jwtGateway with policy lines added to the test policy
// and config added to toolgate.yaml.
func jwtGatewayWith(t *testing.T, policy, config string) (string, func(claims jwt.MapClaims) string) {
	t.Helper()
	return jwtGatewayFor(t, stdioUpstream(t, "hostile", ""), policy, config)
}

// jwtGatewayFor is jwtGatewayWith over the given servers (mcpServers YAML).
func jwtGatewayFor(t *testing.T, servers, policy, config string) (string, func(claims jwt.MapClaims) string) {
	t.Helper()
	cfg, mint := jwtConfig(t, servers, policy, config)
	url, _ := httpGateway(t, cfg)
	return url, mint
}

// jwtConfig writes the configuration jwtGatewayFor runs, and returns its path and the token minter.
func jwtConfig(t *testing.T, servers, policy, config string) (string, func(claims jwt.MapClaims) string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, servers)
	dir := filepath.Dir(cfg)
	b64 := func(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
	jwks := fmt.Sprintf(`{"keys":[{"kty":"RSA","kid":"k1","use":"sig","alg":"RS256","n":%q,"e":%q}]}`,
		b64(key.N.Bytes()), b64(big.NewInt(int64(key.E)).Bytes()))
	write(t, filepath.Join(dir, "jwks.json"), jwks)
	raw := mustRead(t, cfg)
	write(t, cfg, strings.Replace(raw, "auth:\n", fmt.Sprintf(`auth:
  resource: %q
  jwt:
    issuer: %q
    jwks_file: jwks.json
    roles_claim: roles
`, testResource, testIssuer), 1))
	write(t, cfg, mustRead(t, cfg)+config)
	write(t, filepath.Join(dir, "policy.csv"), testPolicy(servers)+policy)
	mint := func(claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	return cfg, mint
}

func validClaims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": testIssuer, "aud": testResource, "sub": sub,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// A JWT from the identity provider works like an API key; roles in the
// token become Casbin roles for that request only.
func TestJWTThroughGateway(t *testing.T) {
	url, mint := jwtGateway(t)
	alice := connectHTTP(t, url, mint(validClaims("alice")))
	if _, env := callE2E(t, alice, "hostile__echo", `{}`); env["ok"] != true {
		t.Fatalf("alice by JWT: %v", env)
	}
	claims := validClaims("dora")
	claims["roles"] = []string{"auditor"}
	dora := connectHTTP(t, url, mint(claims))
	if _, env := callE2E(t, dora, "hostile__env", `{}`); env["ok"] != true {
		t.Fatalf("role from the token not applied: %v", env)
	}
	if _, env := callE2E(t, dora, "hostile__echo", `{}`); env["error_code"] != "tool_not_allowed" {
		t.Fatalf("dora got more than the token's role: %v", env)
	}
}

func TestJWTRejectedBeforeMCP(t *testing.T) {
	url, mint := jwtGateway(t)
	expired := validClaims("alice")
	expired["exp"] = time.Now().Add(-time.Hour).Unix()
	wrongAud := validClaims("alice")
	wrongAud["aud"] = "https://other.test/mcp"
	wrongIss := validClaims("alice")
	wrongIss["iss"] = "https://evil.test/"
	none := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims("alice"))
	noneTok, _ := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	cases := []struct {
		name, auth, query string
		want              int
	}{
		{"expired", mint(expired), "", 401},
		{"wrong audience", mint(wrongAud), "", 401},
		{"wrong issuer", mint(wrongIss), "", 401},
		{"alg none", noneTok, "", 401},
		{"token in the query string", "", "?access_token=" + mint(validClaims("alice")), 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, url+c.query, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if c.auth != "" {
				req.Header.Set("Authorization", "Bearer "+c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			challenge := resp.Header.Get("WWW-Authenticate")
			if resp.StatusCode != c.want || !strings.Contains(challenge, "resource_metadata=") {
				t.Fatalf("status %d, challenge %q, body %s", resp.StatusCode, challenge, body)
			}
			if strings.Contains(string(body), "expired") || strings.Contains(string(body), "audience") {
				t.Errorf("the reason leaked to the client: %s", body)
			}
		})
	}
}

// RFC 9728 metadata is served where the challenge points.
func TestProtectedResourceMetadata(t *testing.T) {
	url, _ := jwtGateway(t)
	base := strings.TrimSuffix(url, "/mcp")
	resp, err := http.Get(base + "/.well-known/oauth-protected-resource/mcp")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil || resp.StatusCode != 200 {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	if doc["resource"] != testResource || fmt.Sprint(doc["authorization_servers"]) != "["+testIssuer+"]" {
		t.Fatalf("metadata %v", doc)
	}
}
