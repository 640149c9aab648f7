package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestExpand(t *testing.T) {
	env := envOf(map[string]string{"A": "alpha", "EMPTY": "", "UTF": "ü"})
	tests := []struct {
		name, in, want string
		unset          []string
		err            string
	}{
		{name: "no references", in: "plain $ text $$ and $HOME", want: "plain $ text $$ and $HOME"},
		{name: "set", in: "x${A}y", want: "xalphay"},
		{name: "set but empty", in: "[${EMPTY}]", want: "[]"},
		{name: "default when unset", in: "${NOPE:-fallback}", want: "fallback"},
		{name: "default when empty", in: "${EMPTY:-fallback}", want: "fallback"},
		{name: "default ignored when set", in: "${A:-fallback}", want: "alpha"},
		{name: "empty default", in: "[${NOPE:-}]", want: "[]"},
		{name: "default may contain colons", in: "${NOPE:-http://x:1}", want: "http://x:1"},
		{name: "escape", in: "$${A} is literal", want: "${A} is literal"},
		{name: "escape next to reference", in: "$${A}${A}", want: "${A}alpha"},
		{name: "multi-byte", in: "${UTF}ß", want: "üß"},
		{name: "all unset names", in: "${X}-${A}-${Y}", want: "-alpha-", unset: []string{"X", "Y"}},
		{name: "unterminated", in: "${A", err: "unterminated"},
		{name: "empty name", in: "${}", err: "invalid reference ${}"},
		{name: "shell-only syntax", in: "${A-b}", err: "expected ${NAME} or ${NAME:-default}"},
		{name: "name starting with a digit", in: "${1A}", err: "invalid reference"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, unset, err := expand(tt.in, env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want || !slices.Equal(unset, tt.unset) {
				t.Fatalf("expand(%q) = %q, %v, %v; want %q, %v", tt.in, got, unset, err, tt.want, tt.unset)
			}
		})
	}
}

// TestExpansionInConfig checks expansion where it matters: on values, after YAML parsing.
func TestExpansionInConfig(t *testing.T) {
	env := envOf(map[string]string{"TOKEN": "s3cret", "DIR": "/srv"})
	tests := []struct {
		name   string
		server string // the body of server s
		get    func(*Server) string
		want   string
	}{
		{"variable", `{url: "http://h/mcp", headers: {Authorization: "Bearer ${TOKEN}"}}`,
			func(s *Server) string { return s.Headers["Authorization"] }, "Bearer s3cret"},
		{"default", `{url: "http://h/mcp", headers: {X-Region: "${REGION:-eu}"}}`,
			func(s *Server) string { return s.Headers["X-Region"] }, "eu"},
		{"escape", `{url: "http://h/mcp", headers: {X-Tmpl: "$${TOKEN}"}}`,
			func(s *Server) string { return s.Headers["X-Tmpl"] }, "${TOKEN}"},
		{"url", `{url: "http://h${DIR}/mcp"}`,
			func(s *Server) string { return s.URL }, "http://h/srv/mcp"},
		{"list items", `{command: x, args: ["--dir=${DIR}"]}`,
			func(s *Server) string { return s.Args[0] }, "--dir=/srv"},
		{"keys are not expanded", `{command: x, tools: {"${TOKEN}": {timeout: 1s}}}`,
			func(s *Server) string { return strings.Join(slices.Collect(maps.Keys(s.Tools)), ",") }, "${TOKEN}"},
		{"block string", "\n    command: x\n    env:\n      CERT: |\n        ${DIR}/cert",
			func(s *Server) string { return s.Env["CERT"] }, "/srv/cert\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("toolgate.yaml", []byte("mcpServers:\n  s: "+tt.server+"\n"), env)
			if err != nil {
				t.Fatal(err)
			}
			if got := tt.get(c.Servers["s"]); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestExpansionCannotInjectYAML: a variable holding YAML stays one string value. Spliced into the file,
// this one would add a url key and make the server invalid; as a value it is just text.
func TestExpansionCannotInjectYAML(t *testing.T) {
	trick := "x\n    url: http://evil/"
	c, err := Parse("toolgate.yaml", []byte("mcpServers:\n  s:\n    command: x\n    env: {A: \"${TRICK}\"}\n"),
		envOf(map[string]string{"TRICK": trick}))
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Servers["s"]; s.URL != "" || s.Env["A"] != trick || s.Transport != TransportStdio {
		t.Fatalf("injected: %+v", s)
	}
}
