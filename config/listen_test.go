package config

import "testing"

// The fast path is on unless listen.fast_path says false; anything but a
// boolean is refused.
func TestHTTPFastPath(t *testing.T) {
	for src, want := range map[string]bool{
		"":                                  true,
		"listen: {fast_path: true}\n":       true,
		"listen:\n  fast_path: false\n":     false,
		"listen: {http: \"127.0.0.1:0\"}\n": true,
	} {
		cfg, err := Parse("toolgate.yaml", []byte(src), envOf(nil))
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if got := cfg.HTTPFastPath(); got != want {
			t.Errorf("%q: HTTPFastPath() = %v, want %v", src, got, want)
		}
	}
	problems := parseProblems(t, "listen:\n  fast_path: sometimes\n", nil)
	if len(problems) != 1 || problems[0].Key != "listen.fast_path" || problems[0].Line != 2 {
		t.Fatalf("fast_path: sometimes: %v", problems)
	}
}
