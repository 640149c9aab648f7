package authn

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestBearerKeptRedacted: a JWT caller's subject keeps the token for token_exchange upstreams, and no
// way of printing, logging or encoding the subject shows it; an API-key caller's subject keeps nothing.
func TestBearerKeptRedacted(t *testing.T) {
	srv := newJWKSServer(t, defaultJWKS())
	a, _ := newAuth(t, jwtOptions(srv.URL, nil))
	token := rs256(t, nil)
	sub, err := a.Authenticate(request("", bearer(token)))
	if err != nil {
		t.Fatal(err)
	}
	if sub.Bearer.Reveal() != token {
		t.Fatal("the JWT is not kept on the subject")
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("call", "subject", sub, "bearer", sub.Bearer)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("call", "subject", sub, "bearer", sub.Bearer)
	js, _ := json.Marshal(sub)
	out := strings.Join([]string{fmt.Sprint(sub), fmt.Sprintf("%+v %#v %s %q %x", sub, sub, sub.Bearer, sub.Bearer, sub.Bearer),
		logs.String(), string(js)}, "\n")
	sig := token[strings.LastIndex(token, ".")+1:]
	if strings.Contains(out, sig) || strings.Contains(out, token[:20]) {
		t.Errorf("the token shows:\n%s", out)
	}
	if !strings.Contains(out, "[redacted]") {
		t.Errorf("no redaction marker:\n%s", out)
	}

	key, err := a.Authenticate(request("", bearer(aliceKey)))
	if err != nil {
		t.Fatal(err)
	}
	if key.Bearer != "" {
		t.Error("an API key was kept on the subject")
	}
}
