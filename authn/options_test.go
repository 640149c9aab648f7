package authn

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"
)

// TestZeroOptions: Options{} builds an Authenticator that accepts no credential, serves no metadata and
// challenges without resource_metadata.
func TestZeroOptions(t *testing.T) {
	a, err := New(context.Background(), Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, req := range []struct {
		name, auth string
		challenge  string
	}{
		{"no credential", "", `Bearer realm="toolgate"`},
		{"an API key", bearer(aliceKey), `Bearer realm="toolgate", error="invalid_token", error_description="the credential is not valid here"`},
		{"a JWT", bearer("aaa.bbb.ccc"), `Bearer realm="toolgate", error="invalid_token", error_description="the credential is not valid here"`},
	} {
		r := request("")
		if req.auth != "" {
			r = request("", req.auth)
		}
		_, err := a.Authenticate(r)
		if f := failure(t, err); f.Status != 401 || f.Challenge != req.challenge {
			t.Errorf("%s: got %d %s, want 401 %s", req.name, f.Status, f.Challenge, req.challenge)
		}
	}
	if a.ProtectedResourceMetadata() != nil || a.MetadataURL() != "" || a.MetadataPaths() != nil {
		t.Error("metadata served without a resource")
	}
}

// TestJWTOptionsResolve: every zero JWTOptions field becomes its documented default, set fields are kept,
// and NoClockSkew means no leeway.
func TestJWTOptionsResolve(t *testing.T) {
	tests := []struct {
		name string
		j    JWTOptions
		want jwtSettings
	}{
		{"zero", JWTOptions{}, jwtSettings{
			audience: resource, refresh: 10 * time.Minute, leeway: 60 * time.Second,
			principalClaim: "sub", algorithms: []string{"RS256", "ES256", "EdDSA"},
		}},
		{"every field set", JWTOptions{
			Audience: "api://toolgate", Refresh: time.Hour, ClockSkew: 5 * time.Second,
			PrincipalClaim: "email", Algorithms: []string{"PS256", "ES384"},
		}, jwtSettings{
			audience: "api://toolgate", refresh: time.Hour, leeway: 5 * time.Second,
			principalClaim: "email", algorithms: []string{"PS256", "ES384"},
		}},
		{"no clock skew, negative refresh", JWTOptions{ClockSkew: NoClockSkew, Refresh: -time.Second}, jwtSettings{
			audience: resource, refresh: DefaultJWKSRefresh, leeway: 0,
			principalClaim: DefaultPrincipalClaim, algorithms: DefaultAlgorithms(),
		}},
		{"any negative clock skew is none", JWTOptions{ClockSkew: -time.Minute}, jwtSettings{
			audience: resource, refresh: DefaultJWKSRefresh, leeway: 0,
			principalClaim: DefaultPrincipalClaim, algorithms: DefaultAlgorithms(),
		}},
		{"unaccepted algorithms dropped", JWTOptions{Algorithms: []string{"HS256", "RS384", "none"}}, jwtSettings{
			audience: resource, refresh: DefaultJWKSRefresh, leeway: DefaultClockSkew,
			principalClaim: DefaultPrincipalClaim, algorithms: []string{"RS384"},
		}},
		{"only unaccepted algorithms", JWTOptions{Algorithms: []string{"HS256"}}, jwtSettings{
			audience: resource, refresh: DefaultJWKSRefresh, leeway: DefaultClockSkew,
			principalClaim: DefaultPrincipalClaim, algorithms: []string{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.j.Algorithms)
			got := tt.j.resolve(resource)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("resolve = %+v, want %+v", got, tt.want)
			}
			if !slices.Equal(tt.j.Algorithms, in) {
				t.Fatalf("resolve changed the caller's Algorithms: %v, was %v", tt.j.Algorithms, in)
			}
		})
	}
}

// TestAlgorithms: the defaults are accepted, none and HS* never are, and the lists are fresh copies.
func TestAlgorithms(t *testing.T) {
	for _, alg := range DefaultAlgorithms() {
		if !AlgorithmAccepted(alg) {
			t.Errorf("default %s is not accepted", alg)
		}
	}
	for _, alg := range []string{"none", "HS256", "HS384", "HS512", "rs256", ""} {
		if AlgorithmAccepted(alg) {
			t.Errorf("%q is accepted", alg)
		}
	}
	DefaultAlgorithms()[0] = "none"
	AcceptedAlgorithms()[0] = "none"
	if DefaultAlgorithms()[0] != "RS256" || AcceptedAlgorithms()[0] != "RS256" || AlgorithmAccepted("none") {
		t.Fatal("a caller changed the package's algorithm lists")
	}
}
