package config

import (
	"slices"
	"strings"
	"testing"
)

const jwtAuth = "auth:\n  resource: https://gw.example.com/mcp\n  jwt: {issuer: \"https://idp.example.com/\", jwks_url: \"https://idp.example.com/jwks\"}\n"

// upstreamAuthEnv holds the secret every case references.
var upstreamAuthEnv = map[string]string{"ORDERS_SECRET": "s3cr3t-from-env"}

func ccServer(extra string) string {
	return "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth:\n      mode: client_credentials\n" +
		"      token_url: https://idp.example.com/oauth/token\n      client_id: toolgate\n      client_secret: ${ORDERS_SECRET}\n" + extra
}

var upstreamAuthProblems = []problemCase{
	{"unknown mode", "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth: {mode: oauth2}\n", nil, 4,
		"mcpServers.orders.auth.mode", `expected one of static, client_credentials, token_exchange, per_user, oauth, got "oauth2"`},
	{"literal secret", strings.Replace(ccServer(""), "${ORDERS_SECRET}", "hunter2-literal", 1), nil, 8,
		"mcpServers.orders.auth.client_secret", "expected a reference to an environment variable"},
	{"secret with a default", strings.Replace(ccServer(""), "${ORDERS_SECRET}", "${ORDERS_SECRET:-hunter2-literal}", 1), nil, 8,
		"mcpServers.orders.auth.client_secret", "a secret is never written in the config file"},
	{"secret unset", ccServer(""), map[string]string{}, 8, "mcpServers.orders.auth.client_secret", "environment variable ORDERS_SECRET is not set"},
	{"no token_url", strings.Replace(ccServer(""), "      token_url: https://idp.example.com/oauth/token\n", "", 1), upstreamAuthEnv, 4,
		"mcpServers.orders.auth", "token_url is required"},
	{"no client_id", strings.Replace(ccServer(""), "      client_id: toolgate\n", "", 1), upstreamAuthEnv, 4,
		"mcpServers.orders.auth", "client_id is required"},
	{"plain http token_url", strings.Replace(ccServer(""), "https://idp.example.com/oauth/token", "http://idp.example.com/oauth/token", 1), upstreamAuthEnv, 6,
		"mcpServers.orders.auth.token_url", "expected an https:// URL (plain http is accepted for loopback hosts only"},
	{"stdio server", "mcpServers:\n  orders:\n    command: orders-server\n    auth:\n      mode: client_credentials\n" +
		"      token_url: https://idp.example.com/oauth/token\n      client_id: toolgate\n      client_secret: ${ORDERS_SECRET}\n", upstreamAuthEnv, 5,
		"mcpServers.orders.auth.mode", "mode client_credentials applies only to Streamable HTTP servers (url)"},
	{"sse server", strings.Replace(ccServer(""), "    url: https://orders.example.com/mcp\n", "    url: https://orders.example.com/sse\n    type: sse\n", 1), upstreamAuthEnv, 6,
		"mcpServers.orders.auth.mode", "not type: sse"},
	{"authorization header beside", strings.Replace(ccServer(""), "    auth:\n", "    headers: {authorization: \"Bearer x\"}\n    auth:\n", 1), upstreamAuthEnv, 4,
		"mcpServers.orders.headers.authorization", "an Authorization header cannot be set beside auth mode client_credentials"},
	{"fallback on client_credentials", ccServer("      fallback: client_credentials\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.fallback", "fallback applies only to auth mode token_exchange"},
	{"static with a token_url", "mcpServers:\n  orders:\n    url: https://orders.example.com/mcp\n    auth:\n      mode: static\n      token_url: https://idp.example.com/t\n", nil, 6,
		"mcpServers.orders.auth.token_url", "token_url applies only to auth modes client_credentials and token_exchange"},
	{"scope with a space", ccServer("      scopes: [\"orders:read orders:write\"]\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.scopes[0]", "expected one scope token"},
	{"resource not a URL", ccServer("      resource: orders\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.resource", "expected an absolute http:// or https:// URL"},
	{"token_exchange without auth.jwt", strings.Replace(ccServer(""), "client_credentials", "token_exchange", 1), upstreamAuthEnv, 5,
		"mcpServers.orders.auth.mode", "auth.jwt is not configured"},
	{"unknown subject_token_type", jwtAuth + strings.Replace(ccServer("      subject_token_type: id_token\n"), "client_credentials", "token_exchange", 1), upstreamAuthEnv, 12,
		"mcpServers.orders.auth.subject_token_type", `expected one of access_token, jwt, got "id_token"`},
	{"unknown fallback", jwtAuth + strings.Replace(ccServer("      fallback: static\n"), "client_credentials", "token_exchange", 1), upstreamAuthEnv, 12,
		"mcpServers.orders.auth.fallback", `expected one of client_credentials, got "static"`},
	{"unknown auth key", ccServer("      client_assertion: x\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.client_assertion", "unknown key; allowed keys here: audience, client_id, client_secret, fallback, format, header, issuer, list_as, mode, resource, scopes, service_secret, subject_token_type, token_url"},
	{"oauth with a token_url", oauthServer("      token_url: https://idp.example.com/t\n"), oauthEnv, 6,
		"mcpServers.crm.auth.token_url", "token_url applies only to auth modes client_credentials and token_exchange (mode oauth discovers"},
	{"oauth secret without client_id", oauthServer("      client_secret: ${ORDERS_SECRET}\n"), oauthEnv, 6,
		"mcpServers.crm.auth.client_secret", "a client_secret needs the client_id it belongs to"},
	{"oauth literal secret", oauthServer("      client_id: tg\n      client_secret: hunter2-literal\n"), oauthEnv, 7,
		"mcpServers.crm.auth.client_secret", "expected a reference to an environment variable"},
	{"oauth without list_as", "mcpServers:\n  crm:\n    url: https://mcp.crm.example.com/mcp\n    auth: {mode: oauth}\n", oauthEnv, 4,
		"mcpServers.crm.auth", "list_as is required: the principal whose view of the upstream"},
	{"oauth client_secret without issuer", oauthServer("      client_id: tg\n      client_secret: ${ORDERS_SECRET}\n"), oauthEnv, 4,
		"mcpServers.crm.auth", "issuer is required with client_secret"},
	{"oauth issuer over plain http", oauthServer("      issuer: http://auth.example.com\n"), oauthEnv, 6,
		"mcpServers.crm.auth.issuer", "expected an https:// URL"},
	{"issuer on client_credentials", ccServer("      issuer: https://idp.example.com\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.issuer", "issuer applies only to auth mode oauth"},
	{"list_as on client_credentials", ccServer("      list_as: alice\n"), upstreamAuthEnv, 9,
		"mcpServers.orders.auth.list_as", "list_as applies only to auth mode oauth"},
	{"oauth on stdio", "mcpServers:\n  crm:\n    command: crm-server\n    auth: {mode: oauth}\n", oauthEnv, 4,
		"mcpServers.crm.auth.mode", "mode oauth applies only to Streamable HTTP servers (url)"},
	{"connect base_url plain http", "connect: {base_url: \"http://toolgate.example.com\"}\n", nil, 1,
		"connect.base_url", "expected an https:// URL (plain http is accepted for loopback hosts only"},
	{"connect key too short", "connect: {key: \"${ORDERS_SECRET}\"}\n", upstreamAuthEnv, 1,
		"connect.key", "expected at least 32 characters"},
	{"connect metadata URL not under base_url", "connect: {base_url: \"https://tg.example.com\", client_metadata_url: \"https://elsewhere.example.com/c.json\"}\n", nil, 1,
		"connect.client_metadata_url", "expected a URL under connect.base_url"},
}

func TestUpstreamAuthProblems(t *testing.T) {
	for _, tt := range upstreamAuthProblems {
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
			if strings.Contains(got, "hunter2") || strings.Contains(got, "s3cr3t") {
				t.Errorf("the problem echoes the secret: %s", got)
			}
		})
	}
}

func TestUpstreamAuthLoads(t *testing.T) {
	src := jwtAuth + "mcpServers:\n" +
		"  plain:\n    url: https://plain.example.com/mcp\n    headers: {Authorization: \"Bearer x\"}\n" +
		"  service:\n    url: https://svc.example.com/mcp\n    auth:\n      mode: client_credentials\n      token_url: https://idp.example.com/oauth/token\n" +
		"      client_id: toolgate\n      client_secret: ${ORDERS_SECRET}\n      scopes: [svc:read]\n      resource: https://svc.example.com/mcp\n" +
		"  orders:\n    url: https://orders.example.com/mcp\n    egress: {allow: [loopback]}\n    auth:\n      mode: token_exchange\n      token_url: http://127.0.0.1:9000/oauth/token\n" +
		"      client_id: toolgate\n      client_secret: ${ORDERS_SECRET}\n      audience: orders-api\n      subject_token_type: jwt\n      fallback: client_credentials\n"
	c, err := Parse("toolgate.yaml", []byte(src), envOf(upstreamAuthEnv))
	if err != nil {
		t.Fatal(err)
	}
	if m := c.Servers["plain"].AuthMode(); m != AuthStatic {
		t.Errorf("a server without auth has mode %q, want static", m)
	}
	svc := c.Servers["service"]
	if svc.AuthMode() != AuthClientCredentials || svc.Auth.ClientSecret != "s3cr3t-from-env" || !slices.Equal(svc.Auth.Scopes, []string{"svc:read"}) {
		t.Errorf("service: %+v", svc.Auth)
	}
	o := c.Servers["orders"]
	if o.AuthMode() != AuthTokenExchange || o.Auth.SubjectTokenType != "jwt" || o.Auth.Fallback != AuthClientCredentials || o.Auth.Audience != "orders-api" {
		t.Errorf("orders: %+v", o.Auth)
	}
}

// oauthEnv holds the vault's key (mode oauth keeps tokens in it) and the secret the cases reference.
var oauthEnv = map[string]string{DefaultCredentialsKeyEnv: testVaultKey, "ORDERS_SECRET": "s3cr3t-from-env"}

func oauthServer(extra string) string {
	return "mcpServers:\n  crm:\n    url: https://mcp.crm.example.com/mcp\n    auth:\n      mode: oauth\n" + extra + "      list_as: alice\n"
}
