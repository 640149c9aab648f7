package redact

// The names of the default patterns.
const (
	PrivateKey       = "private_key"
	JWT              = "jwt"
	AWSAccessKey     = "aws_access_key"
	AWSSecretKey     = "aws_secret_key"
	GCPAPIKey        = "gcp_api_key"
	AzureKey         = "azure_key"
	AzureSAS         = "azure_sas"
	AzureSecret      = "azure_client_secret"
	GitHubToken      = "github_token"
	SlackToken       = "slack_token"
	StripeKey        = "stripe_key"
	BearerToken      = "bearer_token"
	BasicAuth        = "basic_auth"
	ConnectionSecret = "connection_string_password"
)

// defaults are the patterns applied unless disabled, most specific first:
// a JWT after "Bearer " is counted as a jwt, and the bearer pattern then
// finds only "[redacted:jwt]", which it does not match. Each keeps false
// positives rare: a fixed prefix with the token's own alphabet and length,
// or a key name the secret follows. A GCP service account key is a PEM
// private key inside JSON: private_key covers it.
var defaults = []Pattern{
	// PEM and PGP private keys; one without its END line is redacted to
	// the end of the text (a clipped key is still a key).
	{Name: PrivateKey, before: 40, after: -1, windowed: true, Keywords: []string{"PRIVATE KEY"},
		Regexp: `-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|[\s\S]*)`},
	// A JWT's header is base64url of {"... : it starts with eyJ.
	{Name: JWT, before: 0, after: 16384, windowed: true, Keywords: []string{"eyJ"},
		Regexp: `\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`},
	// AWS access key IDs: AKIA (long-term), ASIA (temporary), and the rarer prefixes.
	{Name: AWSAccessKey, before: 0, after: 24, windowed: true, Keywords: []string{"AKIA", "ASIA", "ABIA", "ACCA", "A3T"},
		Regexp: `\b(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16}\b`},
	// AWS secret access keys have no prefix: 40 characters after their name.
	{Name: AWSSecretKey, before: 8, after: 96, windowed: true, Keywords: []string{"ecret_access_key", "ECRET_ACCESS_KEY", "ecretAccessKey", "ws_secret_key", "WS_SECRET_KEY"},
		Regexp: `(?i)(?:aws_?secret_?(?:access_?)?key|secret_?access_?key)(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?(?P<secret>[A-Za-z0-9/+=]{40})(?:[^A-Za-z0-9/+=]|$)`},
	{Name: GCPAPIKey, before: 0, after: 40, windowed: true, Keywords: []string{"AIza"},
		Regexp: `AIza[0-9A-Za-z_-]{35}`},
	// Azure storage account and Service Bus keys in connection strings.
	{Name: AzureKey, before: 0, after: 256, windowed: true, Keywords: []string{"AccountKey=", "SharedAccessKey="},
		Regexp: `(?:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}={0,2})`},
	// The signature of an Azure shared access signature URL.
	{Name: AzureSAS, before: 6, after: 512, windowed: true, Keywords: []string{"sig="},
		Regexp: `(?:[?&]|\\u0026)sig=(?P<secret>[A-Za-z0-9%+/]{20,}(?:%3D|=){0,2})`},
	// Entra ID (Azure AD) client secrets: three characters, a digit, Q~.
	{Name: AzureSecret, before: 5, after: 48, windowed: true, Keywords: []string{"Q~"},
		Regexp: `(?:^|[^A-Za-z0-9_~.-])(?P<secret>[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34})`},
	{Name: GitHubToken, before: 0, after: 320, windowed: true, Keywords: []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"},
		Regexp: `\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})`},
	// Slack tokens and incoming-webhook URLs.
	{Name: SlackToken, before: 8, after: 320, windowed: true, Keywords: []string{"xoxb-", "xoxp-", "xoxa-", "xoxr-", "xoxs-", "xoxe", "hooks.slack.com/"},
		Regexp: `\bxox[abeprs](?:\.[A-Za-z0-9-]+)?-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_+-]+`},
	// Stripe secret and restricted keys, and webhook signing secrets (pk_ keys are public).
	{Name: StripeKey, before: 0, after: 272, windowed: true, Keywords: []string{"sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"},
		Regexp: `\b(?:[sr]k_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,})`},
	{Name: BearerToken, before: 1, after: 8192, windowed: true, Keywords: []string{"earer", "EARER"},
		Regexp: `(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{8,}=*)`},
	// Basic credentials only after Authorization: "basic" alone is an English word.
	{Name: BasicAuth, before: 1, after: 1024, windowed: true, Keywords: []string{"uthorization", "UTHORIZATION"},
		Regexp: `(?i)authorization(?:\\?["'])?\s*[:=]\s*(?:\\?["'])?basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})`},
	// The password of scheme://user:password@host (postgres, mysql, redis, amqp, mongodb, http...).
	{Name: ConnectionSecret, before: 22, after: 1024, windowed: true, near: authorityHasPassword, Keywords: []string{"://"},
		Regexp: `\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@?#"'<>]+:(?P<secret>[^\s@/?#"'<>]+)@`},
}

// authorityHasPassword is the connection-string pattern's cheap check of
// one "://": the authority after it (up to /, ?, #, a quote or a space)
// holds a ":" and then an "@". Text full of URLs, most of them without a
// password, then costs a few bytes per URL and no regexp.
func authorityHasPassword(s string, at int) bool {
	colon := false
	for i := at + 3; i < len(s) && i < at+3+1024; i++ {
		switch s[i] {
		case ':':
			colon = true
		case '@':
			return colon
		case '/', '?', '#', '"', '\'', '<', '>', ' ', '\t', '\n', '\r':
			return false
		}
	}
	return false
}

// DefaultNames are the names of the default patterns, in the order they
// apply.
func DefaultNames() []string {
	out := make([]string, len(defaults))
	for i, p := range defaults {
		out[i] = p.Name
	}
	return out
}
