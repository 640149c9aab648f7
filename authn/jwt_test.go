package authn

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/toolgate/toolgate/authz"
)

// TestJWT is the decision table for JWT bearer tokens against one key set: each token is accepted with
// exactly the expected subject, or refused with 401, error="invalid_token", and a reason for the log.
func TestJWT(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	k := keys()
	alice := &authz.Subject{Principal: "alice", Roles: []string{"support_agent", "viewer"}, Attrs: map[string]string{"region": "eu"}, Scoped: true}
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	pubPEM := func() []byte {
		der, err := x509.MarshalPKIXPublicKey(&k.rsa.PublicKey)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	b64 := base64.RawURLEncoding.EncodeToString

	tests := []struct {
		name   string
		token  func() string
		want   *authz.Subject // nil: refused
		reason string         // refused: Failure.Reason contains it
	}{
		{"valid RS256", func() string { return rs256(t, nil) }, alice, ""},
		{"valid EdDSA", func() string { return sign(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claims(nil), nil) }, alice, ""},
		{"without kid, any key of the set", func() string { return sign(t, jwt.SigningMethodRS256, k.rsa, "", claims(nil), nil) }, alice, ""},
		{"audience list containing ours", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["aud"] = []any{"other-api", resource} })
		}, alice, ""},

		// time, with the default 60s of skew
		{"expired", func() string { return rs256(t, func(c jwt.MapClaims) { c["exp"] = at(-2 * time.Minute) }) }, nil, "token is expired"},
		{"expired within clock skew", func() string { return rs256(t, func(c jwt.MapClaims) { c["exp"] = at(-30 * time.Second) }) }, alice, ""},
		{"not yet valid", func() string { return rs256(t, func(c jwt.MapClaims) { c["nbf"] = at(2 * time.Minute) }) }, nil, "token is not valid yet"},
		{"not yet valid within clock skew", func() string { return rs256(t, func(c jwt.MapClaims) { c["nbf"] = at(30 * time.Second) }) }, alice, ""},
		{"issued in the future", func() string { return rs256(t, func(c jwt.MapClaims) { c["iat"] = at(2 * time.Minute) }) }, nil, "token used before issued"},
		{"no expiry", func() string { return rs256(t, func(c jwt.MapClaims) { delete(c, "exp") }) }, nil, "exp claim is required"},

		// issuer and audience
		{"wrong issuer", func() string { return rs256(t, func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/" }) }, nil, "token has invalid issuer"},
		{"issuer differing by a slash", func() string { return rs256(t, func(c jwt.MapClaims) { c["iss"] = strings.TrimSuffix(issuer, "/") }) }, nil, "invalid issuer"},
		{"no issuer", func() string { return rs256(t, func(c jwt.MapClaims) { delete(c, "iss") }) }, nil, "iss claim is required"},
		{"wrong audience", func() string { return rs256(t, func(c jwt.MapClaims) { c["aud"] = "https://other.example.com/mcp" }) }, nil, "token has invalid audience"},
		{"no audience", func() string { return rs256(t, func(c jwt.MapClaims) { delete(c, "aud") }) }, nil, "aud claim is required"},

		// signature and algorithm
		{"bad signature: another key with the same kid", func() string {
			return sign(t, jwt.SigningMethodRS256, k.otherRSA, "rsa-1", claims(nil), nil)
		}, nil, "token signature is invalid"},
		{"alg none", func() string {
			return sign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-1", claims(nil), nil)
		}, nil, "signing method none is invalid"},
		{"alg confusion: HS256 keyed with the RSA public key", func() string {
			return sign(t, jwt.SigningMethodHS256, pubPEM(), "rsa-1", claims(nil), nil)
		}, nil, "signing method HS256 is invalid"},
		{"alg not in the allow list", func() string { return sign(t, jwt.SigningMethodRS384, k.rsa, "rsa-1", claims(nil), nil) }, nil, "signing method RS384 is invalid"},
		{"alg differs from the key's alg", func() string { return sign(t, jwt.SigningMethodEdDSA, k.ed, "rsa-1", claims(nil), nil) }, nil, `does not match token "alg"`},
		{"key meant for encryption", func() string { return sign(t, jwt.SigningMethodRS256, k.encRSA, "enc-1", claims(nil), nil) }, nil, `"use" parameter value "enc" is not in whitelist`},
		{"embedded jwk header is ignored", func() string {
			pub := k.otherRSA.PublicKey
			hdr := map[string]any{"jwk": map[string]any{"kty": "RSA", "n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}}
			return sign(t, jwt.SigningMethodRS256, k.otherRSA, "rsa-1", claims(nil), hdr)
		}, nil, "token signature is invalid"},
		{"crit header", func() string {
			return sign(t, jwt.SigningMethodRS256, k.rsa, "rsa-1", claims(nil), map[string]any{"crit": []any{"exp"}, "exp": 1})
		}, nil, `"crit" header`},
		{"malformed", func() string { return "eyJhbGciOiJSUzI1NiJ9.bm90IGpzb24.c2ln" }, nil, "token is malformed"},
		{"too large", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", maxTokenBytes) })
		}, nil, "byte limit"},

		// principal
		{"no principal claim", func() string { return rs256(t, func(c jwt.MapClaims) { delete(c, "sub") }) }, nil, `the principal claim "sub" is missing`},
		{"empty principal", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = "" }) }, nil, `the principal claim "sub" is empty`},
		{"principal not a string", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = 42 }) }, nil, "is not a string"},
		{"$ in principal", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = "a$$b" }) }, nil, `contains "$" or ","`},
		{", in principal", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = "alice,admin" }) }, nil, `contains "$" or ","`},
		{"control character in principal", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = "alice\nadmin" }) }, nil, "control characters"},
		{"spaces around principal", func() string { return rs256(t, func(c jwt.MapClaims) { c["sub"] = "alice " }) }, nil, "leading or trailing spaces"},

		// roles and attributes
		{"roles as one space-separated string", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["realm_access"] = map[string]any{"roles": "viewer  support_agent viewer"} })
		}, alice, ""},
		{"no roles claim", func() string { return rs256(t, func(c jwt.MapClaims) { delete(c, "realm_access") }) },
			&authz.Subject{Principal: "alice", Attrs: map[string]string{"region": "eu"}, Scoped: true}, ""},
		{"roles not strings", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["realm_access"] = map[string]any{"roles": []any{"viewer", 7}} })
		}, nil, `the roles claim "realm_access.roles" holds a value that is not a string`},
		{"roles an object", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["realm_access"] = map[string]any{"roles": map[string]any{"a": true}} })
		}, nil, "neither a list of strings nor a string"},
		{"role with a comma", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["realm_access"] = map[string]any{"roles": []any{"viewer,admin"}} })
		}, nil, `a role in claim "realm_access.roles" contains "$" or ","`},
		{"too many roles", func() string {
			return rs256(t, func(c jwt.MapClaims) { c["realm_access"] = map[string]any{"roles": strings.Repeat("r ", maxRoles+1)} })
		}, nil, "over the limit"},
		{"attribute that is not a string is skipped", func() string { return rs256(t, func(c jwt.MapClaims) { c["region"] = 3 }) },
			&authz.Subject{Principal: "alice", Roles: []string{"support_agent", "viewer"}, Scoped: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token := tt.token()
			sub, err := a.Authenticate(request("", bearer(token)))
			if tt.want != nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if sub.Bearer.Reveal() != token {
					t.Fatal("the subject does not keep the caller's JWT (Bearer), which token_exchange upstreams need")
				}
				sub.Bearer = ""
				if !reflect.DeepEqual(sub, *tt.want) {
					t.Fatalf("subject %+v, want %+v", sub, *tt.want)
				}
				return
			}
			f := failure(t, err)
			if f.Status != http.StatusUnauthorized || !strings.Contains(f.Challenge, `error="invalid_token"`) {
				t.Errorf("status %d, challenge %s; want 401 with invalid_token", f.Status, f.Challenge)
			}
			if !strings.Contains(f.Reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", f.Reason, tt.reason)
			}
		})
	}
	if n := srv.fetches.Load(); n != 1 {
		t.Errorf("the key set was fetched %d times; known kids must not cause a refresh", n)
	}
}

// TestJWTClaimSettings: PrincipalClaim, a namespaced roles claim, NoClockSkew, a narrower ClockSkew, a
// narrower algorithm list and an explicit audience.
func TestJWTClaimSettings(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	k := keys()
	tests := []struct {
		name   string
		opts   func(j *JWTOptions)
		token  func() string
		want   *authz.Subject
		reason string
	}{
		{"principal from email", func(j *JWTOptions) { j.PrincipalClaim = "email" },
			func() string { return rs256(t, func(c jwt.MapClaims) { c["email"] = "alice@example.com" }) },
			&authz.Subject{Principal: "alice@example.com", Roles: []string{"support_agent", "viewer"}, Attrs: map[string]string{"region": "eu"}, Scoped: true}, ""},
		{"principal claim missing", func(j *JWTOptions) { j.PrincipalClaim = "email" },
			func() string { return rs256(t, nil) }, nil, `the principal claim "email" is missing`},
		{"namespaced roles claim with dots", func(j *JWTOptions) { j.RolesClaim = "https://toolgate.example/roles"; j.AttributeClaims = nil },
			func() string {
				return rs256(t, func(c jwt.MapClaims) { c["https://toolgate.example/roles"] = []any{"auditor"} })
			}, &authz.Subject{Principal: "alice", Roles: []string{"auditor"}, Scoped: true}, ""},
		{"no clock skew", func(j *JWTOptions) { j.ClockSkew = NoClockSkew },
			func() string { return rs256(t, func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Second).Unix() }) }, nil, "token is expired"},
		{"clock skew narrower than the default", func(j *JWTOptions) { j.ClockSkew = 10 * time.Second },
			func() string { return rs256(t, func(c jwt.MapClaims) { c["exp"] = now.Add(-30 * time.Second).Unix() }) }, nil, "token is expired"},
		{"EdDSA not allowed", func(j *JWTOptions) { j.Algorithms = []string{"RS256"} },
			func() string { return sign(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claims(nil), nil) }, nil, "signing method EdDSA is invalid"},
		{"HS256 in Options built in code is still refused", func(j *JWTOptions) { j.Algorithms = []string{"RS256", "HS256"} },
			func() string { return sign(t, jwt.SigningMethodHS256, []byte("secret"), "rsa-1", claims(nil), nil) }, nil, "signing method HS256 is invalid"},
		{"explicit audience", func(j *JWTOptions) { j.Audience = "api://toolgate" },
			func() string { return rs256(t, nil) }, nil, "token has invalid audience"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := jwtOptions(srv.URL, nil)
			tt.opts(o.JWT)
			a, _ := newAuth(t, o)
			sub, err := a.Authenticate(request("", bearer(tt.token())))
			sub.Bearer = "" // TestJWT checks it
			if tt.want != nil {
				if err != nil || !reflect.DeepEqual(sub, *tt.want) {
					t.Fatalf("got %+v, %v; want %+v", sub, err, *tt.want)
				}
				return
			}
			if f := failure(t, err); !strings.Contains(f.Reason, tt.reason) {
				t.Fatalf("reason %q, want it to contain %q", f.Reason, tt.reason)
			}
		})
	}
}
