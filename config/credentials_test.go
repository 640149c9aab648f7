package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testVaultKey is a valid base64 32-byte key, for tests only.
const testVaultKey = "q1ouvDvb0x2fWw4yCwD5yVn0dE6XwTq0Yl2c9S5vY4M="

var vaultEnv = map[string]string{DefaultCredentialsKeyEnv: testVaultKey, "ORDERS_SVC": "svc-secret-from-env"}

func perUserServer(extra string) string {
	return "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth:\n      mode: per_user\n" + extra
}

var credentialsProblems = []problemCase{
	{"per_user without a key", perUserServer(""), map[string]string{}, 5, "mcpServers.orders.auth.mode",
		"mode per_user keeps each user's credential encrypted, and the key cannot be read: environment variable TOOLGATE_CREDENTIALS_KEY is not set: " +
			"expected a base64 32-byte key (`toolgate credentials newkey` prints one); set TOOLGATE_CREDENTIALS_KEY, or name the key with credentials.key_env or credentials.key_file"},
	{"a short key", perUserServer(""), map[string]string{DefaultCredentialsKeyEnv: "c2hvcnQ="}, 5, "mcpServers.orders.auth.mode",
		"key 1 of 1: expected 32 bytes in base64"},
	{"key_env unset", "credentials: {key_env: TG_VAULT}\n" + perUserServer(""), map[string]string{}, 1, "credentials.key_env",
		"environment variable TG_VAULT is not set"},
	{"key_env not a name", "credentials: {key_env: MY-KEY}\n", nil, 1, "credentials.key_env",
		"expected the name of an environment variable"},
	{"both key_env and key_file", "credentials: {key_env: K, key_file: /k}\n", nil, 1, "credentials.key_file", "set key_env or key_file, not both"},
	{"file with state.redis", "state: {redis: {url: \"redis://127.0.0.1:6379\"}}\ncredentials: {file: creds.json}\n", nil, 2, "credentials.file",
		"applies only without state.redis"},
	{"per_user on stdio", "mcpServers:\n  orders:\n    command: orders\n    auth: {mode: per_user}\n", vaultEnv, 4, "mcpServers.orders.auth.mode",
		"mode per_user applies only to Streamable HTTP servers (url)"},
	{"per_user with a token_url", perUserServer("      token_url: https://idp.example.com/t\n"), vaultEnv, 6, "mcpServers.orders.auth.token_url",
		"token_url applies only to auth modes client_credentials and token_exchange (mode per_user sends each user's own secret)"},
	{"header on client_credentials", ccServer("      header: X-Api-Key\n"), upstreamAuthEnv, 9, "mcpServers.orders.auth.header",
		"header applies only to auth mode per_user"},
	{"format on static", "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth: {mode: static, format: \"{secret}\"}\n", nil, 4,
		"mcpServers.orders.auth.format", "format applies only to auth mode per_user"},
	{"a header that is no name", perUserServer("      header: \"X Api Key\"\n"), vaultEnv, 6, "mcpServers.orders.auth.header",
		`expected an HTTP header name such as X-Api-Key, got "X Api Key"`},
	{"a reserved header", perUserServer("      header: Mcp-Session-Id\n"), vaultEnv, 6, "mcpServers.orders.auth.header",
		"Mcp-Session-Id is set by the gateway or the MCP transport itself"},
	{"format without the secret", perUserServer("      format: Bearer\n"), vaultEnv, 6, "mcpServers.orders.auth.format",
		`expected the secret's place, {secret}, once, such as "Bearer {secret}", got "Bearer"`},
	{"format with the secret twice", perUserServer("      format: \"{secret}{secret}\"\n"), vaultEnv, 6, "mcpServers.orders.auth.format",
		"expected the secret's place, {secret}, once"},
	{"literal service secret", perUserServer("      service_secret: hunter2-literal\n"), vaultEnv, 6, "mcpServers.orders.auth.service_secret",
		"expected a reference to an environment variable"},
	{"the secret's header set beside", strings.Replace(perUserServer("      header: X-Api-Key\n"), "    auth:\n", "    headers: {x-api-key: fixed}\n    auth:\n", 1),
		vaultEnv, 4, "mcpServers.orders.headers.x-api-key", "a x-api-key header cannot be set beside auth mode per_user"},
}

func TestCredentialsProblems(t *testing.T) {
	for _, tt := range credentialsProblems {
		t.Run(tt.name, func(t *testing.T) {
			probs := parseProblems(t, tt.src, tt.env)
			if len(probs) != 1 {
				t.Fatalf("got %d problems, want 1:\n%s", len(probs), (&Problems{List: probs}).Error())
			}
			got := probs[0].String()
			if want := locate(tt.line, tt.key); !strings.HasPrefix(got, want) {
				t.Errorf("got  %s\nwant prefix %s", got, want)
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("got  %s\nwant it to contain %s", got, tt.want)
			}
			if strings.Contains(got, "hunter2") || strings.Contains(got, testVaultKey) || strings.Contains(got, "c2hvcnQ") {
				t.Errorf("the problem echoes a secret or key: %s", got)
			}
		})
	}
}

func TestPerUserLoads(t *testing.T) {
	src := perUserServer("      header: X-Api-Key\n      format: \"Token {secret}\"\n      service_secret: ${ORDERS_SVC}\n") +
		"  crm:\n    url: https://crm.example.com/mcp\n    headers: {X-Api-Key: fixed}\n    auth: {mode: per_user}\n"
	c, err := Parse("/etc/toolgate/toolgate.yaml", []byte(src), envOf(vaultEnv))
	if err != nil {
		t.Fatal(err)
	}
	o := c.Servers["orders"].Auth
	if c.Servers["orders"].AuthMode() != AuthPerUser || o.Header != "X-Api-Key" || o.Format != "Token {secret}" || o.ServiceSecret != "svc-secret-from-env" {
		t.Errorf("orders: %+v", o)
	}
	if got := c.UsesVault(); strings.Join(got, ",") != "crm,orders" {
		t.Errorf("UsesVault = %v", got)
	}
	if c.CredentialsPath() != "/etc/toolgate/toolgate.credentials.json" {
		t.Errorf("CredentialsPath = %q, want beside the config file", c.CredentialsPath())
	}
	if src := c.CredentialsKeySource(); src.Env != DefaultCredentialsKeyEnv || src.File != "" {
		t.Errorf("CredentialsKeySource = %+v", src)
	}
}

// TestCredentialsKeyFile: a key file is read relative to the config file, and one other users may
// read is refused at load.
func TestCredentialsKeyFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "vault.key"), []byte(testVaultKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "credentials: {key_file: vault.key, file: secrets/creds.json}\n" + perUserServer("")
	c, err := Parse(filepath.Join(dir, "toolgate.yaml"), []byte(src), envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	if ks := c.CredentialsKeySource(); ks.File != filepath.Join(dir, "vault.key") {
		t.Errorf("key file %q, want it beside the config file", ks.File)
	}
	if c.CredentialsPath() != filepath.Join(dir, "secrets/creds.json") {
		t.Errorf("CredentialsPath = %q", c.CredentialsPath())
	}
	if err := os.Chmod(filepath.Join(dir, "vault.key"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Parse(filepath.Join(dir, "toolgate.yaml"), []byte(src), envOf(nil))
	if err == nil || !strings.Contains(err.Error(), "credentials.key_file: key file "+filepath.Join(dir, "vault.key")+": mode 0644 lets other users read the key") {
		t.Fatalf("a world-readable key file: %v", err)
	}
}

// The per_user worked example of docs/configuration.md, "Upstream credentials", loads.
func TestPerUserDocExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n**`per_user`**")
	if !ok {
		t.Fatal("docs/configuration.md has no per_user paragraph")
	}
	_, block, _ := strings.Cut(section, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	c, err := Parse("/srv/tg/toolgate.yaml", []byte(block), envOf(map[string]string{DefaultCredentialsKeyEnv: testVaultKey, "TRACKER_SERVICE_KEY": "svc"}))
	if err != nil {
		t.Fatal(err)
	}
	a := c.Servers["tracker"].Auth
	if c.Servers["tracker"].AuthMode() != AuthPerUser || a.Header != "X-Api-Key" || a.Format != "{secret}" || a.ServiceSecret != "svc" {
		t.Fatalf("tracker's auth: %+v", a)
	}
}
