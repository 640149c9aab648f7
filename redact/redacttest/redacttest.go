// Package redacttest holds one sample secret of each default redaction
// pattern, written the way a tool would return it, for the tests of
// package redact and the end-to-end tests that check each pattern is
// redacted wherever upstream text goes. The secrets are assembled from
// pieces so that no complete credential-shaped string sits in the source.
// It is imported only by tests.
package redacttest

import "strings"

// Sample is one default pattern's secret in context.
type Sample struct {
	Pattern string // the pattern that must redact it
	Text    string // the secret with text around it
	Secret  string // what must not survive redaction
	Kept    string // text around the secret that must survive
}

func rep(s string, n int) string { return strings.Repeat(s, n) }

// Samples has one Sample per default pattern, in the order of
// redact.DefaultNames.
func Samples() []Sample {
	pemBody := "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + rep("AbCd", 8)
	pem := "-----BEGIN " + "PRIVATE KEY-----\n" + pemBody + "\n-----END " + "PRIVATE KEY-----"
	jwt := "eyJ" + "hbGciOiJSUzI1NiJ9" + "." + "eyJzdWIiOiJhbGljZSJ9" + "." + rep("sIgN", 8)
	aws := "AKIA" + "Q3EGRBXN4TZ7KW2M"
	awsSecret := rep("wJalrXUtnFEMI/K7MDENG+bPxRfiCY", 1) + "EXAMPLEKEY"
	gcp := "AIza" + "SyD" + rep("x9_Yq-", 5) + "ab"
	azureKey := rep("Zm9vYmFy", 10) + "Zm9vYmFyZm9v" + "=="
	azureSig := rep("Ab3%2B", 5) + "%3D"
	azureSecret := "aB1" + "8Q~" + rep("x.Y_z-", 5) + "ab"
	gh := "ghp_" + rep("a1B2", 9)
	slack := "xoxb-" + "1234567890-" + rep("AbC", 6)
	stripe := "sk_" + "live_" + rep("4eC39HqLyjWD", 2)
	bearer := rep("tok3n-", 4)
	basic := "YWxpY2U6" + "czNjcjN0"
	pgPassword := "s3cr3t-pw"
	return []Sample{
		{Pattern: "private_key", Text: "key file:\n" + pem + "\nend of file", Secret: pemBody, Kept: "end of file"},
		{Pattern: "jwt", Text: "session token " + jwt + " expires soon", Secret: jwt, Kept: "expires soon"},
		{Pattern: "aws_access_key", Text: "access key " + aws + " (eu-west-1)", Secret: aws, Kept: "(eu-west-1)"},
		{Pattern: "aws_secret_key", Text: "aws_secret_access_key = " + awsSecret + "\nregion = eu", Secret: awsSecret, Kept: "aws_secret_access_key = "},
		{Pattern: "gcp_api_key", Text: "maps key: " + gcp, Secret: gcp, Kept: "maps key: "},
		{Pattern: "azure_key", Text: "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=" + azureKey + ";EndpointSuffix=core.windows.net",
			Secret: azureKey, Kept: "AccountName=acct;AccountKey="},
		{Pattern: "azure_sas", Text: "https://acct.blob.core.windows.net/c/b?sv=2022-11-02&sr=b&sig=" + azureSig, Secret: azureSig, Kept: "sr=b&sig="},
		{Pattern: "azure_client_secret", Text: "client secret: " + azureSecret, Secret: azureSecret, Kept: "client secret: "},
		{Pattern: "github_token", Text: "GITHUB_TOKEN=" + gh, Secret: gh, Kept: "GITHUB_TOKEN="},
		{Pattern: "slack_token", Text: "slack bot " + slack, Secret: slack, Kept: "slack bot "},
		{Pattern: "stripe_key", Text: "stripe: " + stripe, Secret: stripe, Kept: "stripe: "},
		{Pattern: "bearer_token", Text: "Authorization: Bearer " + bearer, Secret: bearer, Kept: "Authorization: Bearer "},
		{Pattern: "basic_auth", Text: "Authorization: Basic " + basic, Secret: basic, Kept: "Authorization: Basic "},
		{Pattern: "connection_string_password", Text: "DATABASE_URL=postgres://app:" + pgPassword + "@db.internal:5432/orders",
			Secret: pgPassword, Kept: "postgres://app:"},
	}
}
