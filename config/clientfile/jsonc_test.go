package clientfile

import (
	"encoding/json"
	"testing"
)

func TestStripJSONC(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"line comment", "{\"a\": 1 // one\n}", "{\"a\": 1       \n}"},
		{"block comment across lines", "{/* x\ny */\"a\": 1}", "{    \n    \"a\": 1}"},
		{"slashes in a string", `{"u": "http://x//y/*z*/"}`, `{"u": "http://x//y/*z*/"}`},
		{"escaped quote in a string", `{"q": "a\"//b", "c": 1}`, `{"q": "a\"//b", "c": 1}`},
		{"escaped backslash ends the string", `{"q": "a\\", "c": 1 // x` + "\n}", `{"q": "a\\", "c": 1     ` + "\n}"},
		{"trailing comma in an object", `{"a": 1,}`, `{"a": 1 }`},
		{"trailing comma in a list", `[1, 2, ]`, `[1, 2  ]`},
		{"trailing comma before a comment", "[1, // last\n]", "[1         \n]"},
		{"nested trailing commas", `{"a": [1,], "b": {"c": 2,},}`, `{"a": [1 ], "b": {"c": 2 } }`},
		{"a comma inside a string is kept", `["a,", "]"]`, `["a,", "]"]`},
		{"unterminated block comment is left", `{"a": 1 /* x`, `{"a": 1 /* x`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(stripJSONC([]byte(tc.in)))
			if got != tc.want {
				t.Errorf("stripJSONC(%q)\n got %q\nwant %q", tc.in, got, tc.want)
			}
			if len(got) != len(tc.in) {
				t.Errorf("length changed: offsets would no longer point into the file")
			}
		})
	}
	if err := json.Unmarshal(stripJSONC([]byte(`{"a": 1 /* x`)), new(any)); err == nil {
		t.Error("an unterminated comment must stay an error")
	}
}

func TestSecretShapes(t *testing.T) {
	for _, tc := range []struct {
		s      string
		secret bool
	}{
		{"ghp_exampleexampleexampleexample0123", true},
		{"github_pat_11ABCDEFG0123456789", true},
		{"sk-proj-abcdefghijklmnop", true},
		{"Bearer abc", true},
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig", true},
		{"aB3dE6gH9jK2mN5pQ8sT1vW4", true},
		{"0123456789abcdef0123456789abcdef", true}, // 32 hex
		{"production", false},
		{"repos,issues", false},
		{"/Users/you/Library/Application Support/Claude/X1y2", false},
		{"@modelcontextprotocol/server-filesystem", false},
		{"https://api.githubcopilot.com/mcp/", false},
		{"mcp-server-sqlite-2024", false},
		{"--api-key", false},
		{"8080", false},
	} {
		if got := looksSecret(tc.s); got != tc.secret {
			t.Errorf("looksSecret(%q) = %v, want %v", tc.s, got, tc.secret)
		}
	}
	for name, secret := range map[string]bool{
		"GITHUB_PERSONAL_ACCESS_TOKEN": true, "OPENAI_API_KEY": true, "Authorization": true, "X-Api-Key": true,
		"DB_PASSWORD": true, "CLIENT_SECRET": true, "Cookie": true, "--token": true,
		"NODE_ENV": false, "GIT_AUTHOR_NAME": false, "LOG_LEVEL": false, "--port": false,
	} {
		if got := secretName(name); got != secret {
			t.Errorf("secretName(%q) = %v, want %v", name, got, secret)
		}
	}
}
