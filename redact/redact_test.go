package redact

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/redact/redacttest"
)

func mustNew(t *testing.T, o Options) *Redactor {
	t.Helper()
	r, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestEveryDefaultPatternRedacts: each default pattern's sample loses its
// secret, keeps its context, names the pattern, and is counted once under
// that pattern only.
func TestEveryDefaultPatternRedacts(t *testing.T) {
	samples := redacttest.Samples()
	var names []string
	for _, s := range samples {
		names = append(names, s.Pattern)
	}
	if !slices.Equal(names, DefaultNames()) {
		t.Fatalf("samples cover %v, the defaults are %v", names, DefaultNames())
	}
	var mu sync.Mutex
	counted := map[string]int{}
	r := mustNew(t, Options{Count: func(p string, n int) { mu.Lock(); counted[p] += n; mu.Unlock() }})
	for _, s := range samples {
		t.Run(s.Pattern, func(t *testing.T) {
			got, counts := r.String(s.Text)
			if strings.Contains(got, s.Secret) {
				t.Errorf("the secret survived: %q", got)
			}
			if !strings.Contains(got, "[redacted:"+s.Pattern+"]") || !strings.Contains(got, s.Kept) {
				t.Errorf("got %q, want [redacted:%s] and %q kept", got, s.Pattern, s.Kept)
			}
			if len(counts) != 1 || counts[s.Pattern] != 1 {
				t.Errorf("counts %v, want {%s: 1}", counts, s.Pattern)
			}
		})
	}
	for _, n := range DefaultNames() {
		if counted[n] != 1 {
			t.Errorf("Count heard %d for %s, want 1", counted[n], n)
		}
	}
}

// TestNearMissesAreKept: text that resembles a secret but is not one
// stays as it is, and costs no copy.
func TestNearMissesAreKept(t *testing.T) {
	r := mustNew(t, Options{})
	for _, s := range []string{
		"basic information about the order",
		"the bearer of this note",
		"Bearer short",
		"AKIA is a prefix; AKIA123 is too short",
		"publishable key pk_live_" + strings.Repeat("a", 24),
		"see https://example.com/path?q=1 and mailto:ops@example.com",
		"http://user@host/ has no password",
		"eyJ alone, or eyJhbGciOi without dots",
		"sk_live_ with nothing after",
		"plain text with a : and an @ but no scheme",
	} {
		got, counts := r.String(s)
		if got != s || counts != nil {
			t.Errorf("%q became %q (%v)", s, got, counts)
		}
	}
}

func TestBearerJWTCountsOnceAsJWT(t *testing.T) {
	s := redacttest.Samples()[1]
	got, counts := mustNew(t, Options{}).String("Authorization: Bearer " + s.Secret)
	if got != "Authorization: Bearer [redacted:jwt]" || counts["jwt"] != 1 || counts["bearer_token"] != 0 {
		t.Fatalf("got %q %v", got, counts)
	}
}

func TestSecretGroupKeepsTheRest(t *testing.T) {
	got, _ := mustNew(t, Options{}).String("redis://default:hunter2hunter2@cache:6379/0 and mysql://u:p4ss@db/x")
	if want := "redis://default:[redacted:connection_string_password]@cache:6379/0 and mysql://u:[redacted:connection_string_password]@db/x"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
}

func TestUnterminatedPrivateKeyIsRedactedToTheEnd(t *testing.T) {
	got, _ := mustNew(t, Options{}).String("before -----BEGIN RSA " + "PRIVATE KEY-----\nMIIEow" + strings.Repeat("Ab", 40))
	if got != "before [redacted:private_key]" {
		t.Fatalf("got %q", got)
	}
}

func TestCustomPatternsAndDisable(t *testing.T) {
	r := mustNew(t, Options{Disable: []string{JWT}, Patterns: []Pattern{
		{Name: "acme_token", Regexp: `acme_[A-Za-z0-9]{16}`},                                 // keyword: its literal prefix
		{Name: "employee_id", Regexp: `\bE[0-9]{6}\b`, Keywords: []string{"E0", "E1", "E9"}}, // explicit keywords
	}})
	jwt := redacttest.Samples()[1].Secret
	got, counts := r.String("acme_0123456789abcdef E123456 " + jwt)
	if want := "[redacted:acme_token] [redacted:employee_id] " + jwt; got != want || counts.Total() != 2 {
		t.Fatalf("got %q %v, want %q (jwt disabled)", got, counts, want)
	}
}

func TestBadPatternsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Patterns: []Pattern{{Name: "x", Regexp: `(`}}}, "pattern x: error parsing regexp"},
		{Options{Patterns: []Pattern{{Name: "x", Regexp: `a*`}}}, "matches the empty string"},
		{Options{Patterns: []Pattern{{Name: "X y", Regexp: `a`}}}, `a pattern name is 1 to 40 of a-z 0-9 _, got "X y"`},
		{Options{Patterns: []Pattern{{Name: "x", Regexp: `a`, Keywords: []string{""}}}}, "empty keyword"},
		{Options{Patterns: []Pattern{{Name: "jwt", Regexp: `a`}}}, `pattern "jwt" given twice`},
		{Options{Disable: []string{"jwts"}}, `"jwts" is not a default pattern`},
	} {
		if _, err := New(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.o, err, tc.want)
		}
	}
}

func TestNilRedactorRedactsNothing(t *testing.T) {
	var r *Redactor
	s := redacttest.Samples()[2].Text
	if got, c := r.String(s); got != s || c != nil {
		t.Fatal("a nil Redactor changed text")
	}
	raw := []byte(`{"k":"` + s + `"}`)
	if got, _, _ := r.JSON(raw); string(got) != string(raw) {
		t.Fatal("a nil Redactor changed JSON")
	}
	if r.Lines().Line(s) != s {
		t.Fatal("nil Lines changed a line")
	}
}

// TestJSONRedactsEveryStringValue: strings at any depth, escaped or not,
// lose their secrets; keys and numbers stay exact; JSON without a keyword
// comes back as the same bytes.
func TestJSONRedactsEveryStringValue(t *testing.T) {
	r := mustNew(t, Options{})
	aws := redacttest.Samples()[2].Secret
	escaped := `\u0041` + aws[1:] // "A" escaped: a keyword search of the raw bytes would miss it
	raw := []byte(`{"id":9007199254740993,"creds":[{"key":"` + aws + `"},{"key":"` + escaped + `"}],"note":"ok"}`)
	out, counts, err := r.JSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), aws[4:]) || counts[AWSAccessKey] != 2 {
		t.Fatalf("got %s %v", out, counts)
	}
	var back map[string]any
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	if err := dec.Decode(&back); err != nil || back["id"].(json.Number) != "9007199254740993" || back["note"] != "ok" {
		t.Fatalf("decoded %v, %v", back, err)
	}
	clean := []byte(`{"status":"shipped","order_id":4821}`)
	if got, c, _ := r.JSON(clean); &got[0] != &clean[0] || c != nil {
		t.Error("JSON without a keyword was copied or counted")
	}
	if _, _, err := r.JSON([]byte(`{"a":"AKIA`)); err == nil {
		t.Error("invalid JSON was accepted")
	}
}

func TestLinesRedactAPrivateKeyAcrossLines(t *testing.T) {
	l := mustNew(t, Options{}).Lines()
	in := []string{"starting", "-----BEGIN OPENSSH " + "PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAA", "AAAABG5vbmUAAAAEbm9uZQ", "-----END OPENSSH " + "PRIVATE KEY-----", "listening"}
	var got []string
	for _, line := range in {
		got = append(got, l.Line(line))
	}
	want := []string{"starting", "[redacted:private_key]", "[redacted:private_key]", "[redacted:private_key]", "[redacted:private_key]", "listening"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q", got)
	}
}

// TestContentSeesThroughJSONEscapes: JSON text (a tool's structured answer
// as text, or JSON inside a JSON string) loses secrets that escapes hide
// from a text search, and is left byte for byte when it holds none.
func TestContentSeesThroughJSONEscapes(t *testing.T) {
	r := mustNew(t, Options{})
	aws := redacttest.Samples()[2].Secret
	awsSecret := redacttest.Samples()[3].Secret
	sas := redacttest.Samples()[6].Secret
	for _, tc := range []struct{ in, pattern string }{
		{`{"key":"\u0041` + aws[1:] + `"}`, AWSAccessKey},
		{`{"url":"https://a.blob.core.windows.net/c?sv=1\u0026sig=` + sas + `"}`, AzureSAS},
		{`{"inner":"{\"aws_secret_access_key\": \"` + awsSecret + `\"}"}`, AWSSecretKey},
		{`[{"dsn":"postgres:\/\/app:s3cr3t-pw@db\/orders"}]`, ConnectionSecret},
	} {
		got, counts := r.Content(tc.in)
		if counts[tc.pattern] != 1 || !strings.Contains(got, "[redacted:"+tc.pattern+"]") {
			t.Errorf("Content(%s) = %s %v, want %s redacted", tc.in, got, counts, tc.pattern)
		}
	}
	clean := `{"status":"shipped","note":"a \u0026 b"}`
	if got, counts := r.Content(clean); got != clean || counts != nil {
		t.Errorf("clean JSON text became %s %v", got, counts)
	}
}
