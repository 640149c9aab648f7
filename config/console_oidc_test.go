package config

import (
	"strings"
	"testing"
)

const oidcOK = "  oidc:\n    issuer: https://login.example.com\n    client_id: toolgate\n    client_secret: ${CONSOLE_OIDC_SECRET}\n    redirect_url: https://tg.example.com/ui/oidc/callback\n"

var consoleOIDCProblems = []problemCase{
	{"oidc secret written in the file", "console:\n  oidc:\n    issuer: https://login.example.com\n    client_id: toolgate\n    client_secret: tga_secret\n    redirect_url: https://tg.example.com/ui/oidc/callback\n",
		nil, 5, "console.oidc.client_secret", "expected a reference to an environment variable"},
	{"oidc issuer on plain http", "console:\n  oidc:\n    issuer: http://login.example.com\n    client_id: toolgate\n    redirect_url: https://tg.example.com/ui/oidc/callback\n",
		nil, 3, "console.oidc.issuer", "expected an https:// URL"},
	{"oidc without a client id", "console:\n  oidc:\n    issuer: https://login.example.com\n    redirect_url: https://tg.example.com/ui/oidc/callback\n",
		nil, 2, "console.oidc", "client_id is required"},
	{"oidc redirect elsewhere", "console:\n  oidc:\n    issuer: https://login.example.com\n    client_id: toolgate\n    redirect_url: https://tg.example.com/callback\n",
		nil, 5, "console.oidc.redirect_url", "whose path is /ui/oidc/callback"},
	{"oidc claim with a space", "console:\n  oidc:\n    issuer: https://login.example.com\n    client_id: toolgate\n    redirect_url: https://tg.example.com/ui/oidc/callback\n    principal_claim: \"my claim\"\n",
		nil, 6, "console.oidc.principal_claim", "expected a claim name"},
	{"oidc unknown key", "console:\n  oidc:\n    issuer: https://login.example.com\n    client_id: toolgate\n    redirect_url: https://tg.example.com/ui/oidc/callback\n    scope: openid\n",
		nil, 6, "console.oidc.scope", "allowed keys here: client_id, client_secret, issuer, principal_claim, redirect_url"},
}

func TestConsoleOIDCProblems(t *testing.T) {
	for _, tt := range consoleOIDCProblems {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) {
				t.Errorf("got  %s\nwant prefix %s", got, want)
			}
			if !strings.Contains(got, tt.want) || strings.Contains(got, "tga_secret") {
				t.Errorf("got  %s\nwant it to contain %s, and never the secret", got, tt.want)
			}
		})
	}
}

// With console.oidc, an approver without a key hash signs in there only; without it, the hash is
// still required.
func TestConsoleOIDCSettings(t *testing.T) {
	src := "console:\n  approvers:\n    - {name: erin@example.com}\n    - {name: carol, sha256: \"" + hashA + "\"}\n" + oidcOK
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(src), envOf(map[string]string{"CONSOLE_OIDC_SECRET": "s3cret"}))
	if err != nil {
		t.Fatal(err)
	}
	o := c.ConsoleOIDCConfig()
	if o == nil || o.ClientSecret != "s3cret" || o.PrincipalClaim != "sub" || o.Issuer != "https://login.example.com" || !c.ConsoleEnabled() {
		t.Fatalf("console.oidc: %+v", o)
	}
	var zero Config
	if zero.ConsoleOIDCConfig() != nil {
		t.Fatal("OIDC on without console.oidc")
	}
	if probs := parseProblems(t, "console:\n  approvers:\n    - {name: erin}\n", nil); len(probs) != 1 || !strings.Contains(probs[0].String(), "unless console.oidc is set") {
		t.Fatalf("an approver without a key and no console.oidc: %v", probs)
	}
}
