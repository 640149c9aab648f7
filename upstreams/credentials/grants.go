package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/toolgate/toolgate/sanitize"
)

// maxTokenResponse caps what is read of a token endpoint's answer.
const maxTokenResponse = 64 << 10

// ccFetcher fetches the gateway's client-credentials token with x/oauth2.
type ccFetcher struct {
	cfg    clientcredentials.Config
	client *http.Client
	host   string
}

func newCCFetcher(o Options) *ccFetcher {
	params := url.Values{}
	if o.Audience != "" {
		params.Set("audience", o.Audience)
	}
	if o.Resource != "" {
		params.Set("resource", o.Resource)
	}
	u, _ := url.Parse(o.TokenURL)
	return &ccFetcher{
		cfg: clientcredentials.Config{
			ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL, Scopes: o.Scopes,
			EndpointParams: params,
			// client_secret_basic, which RFC 6749 requires every server to support; auto-detection
			// would send a second request after every refusal.
			AuthStyle: oauth2.AuthStyleInHeader,
		},
		client: o.HTTPClient,
		host:   u.Host,
	}
}

func (f *ccFetcher) fetch(ctx context.Context, now func() time.Time) (grant, error) {
	start := now()
	tok, err := f.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, f.client))
	if err != nil {
		return grant{}, fmt.Errorf("token endpoint at %s: %w", f.host, tokenError(err))
	}
	if t := tok.Type(); t != "Bearer" {
		return grant{}, fmt.Errorf("token endpoint at %s: token_type %q is not supported (only Bearer)", f.host, sanitize.Clip(sanitize.Text(t), 40))
	}
	return newGrant(tok.AccessToken, start, time.Duration(tok.ExpiresIn)*time.Second), nil
}

// tokenError is err without what the server's body said beyond its OAuth error code: x/oauth2's own
// message quotes the body, and a body may echo what was sent.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return &OAuthError{Status: status, Code: cleanCode(re.ErrorCode)}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// OAuthError is a token endpoint's refusal: the HTTP status and the RFC 6749 error code it sent.
type OAuthError struct {
	Status int
	Code   string // "" when the answer had none
}

func (e *OAuthError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("answered HTTP %d", e.Status)
	}
	return fmt.Sprintf("answered HTTP %d, error %q", e.Status, e.Code)
}

// cleanCode keeps an OAuth error code printable and short: it comes from the server.
func cleanCode(s string) string { return sanitize.Clip(sanitize.Text(s), 64) }

// exchangeResponse is RFC 8693 section 2.2.1 (and the error of RFC 6749 section 5.2).
type exchangeResponse struct {
	AccessToken     string          `json:"access_token"`
	IssuedTokenType string          `json:"issued_token_type"`
	TokenType       string          `json:"token_type"`
	ExpiresIn       json.RawMessage `json:"expires_in"`
	Error           string          `json:"error"`
}

// exchange trades the caller's token for one whose audience/resource is the upstream (RFC 8693),
// authenticating as the gateway's client (client_secret_basic, RFC 6749 section 2.3.1).
func (s *Source) exchange(ctx context.Context, subjectToken string) (grant, error) {
	start := s.now()
	form := url.Values{
		"grant_type":           {GrantTypeTokenExchange},
		"subject_token":        {subjectToken},
		"subject_token_type":   {s.o.SubjectTokenType},
		"requested_token_type": {TokenTypeAccessToken},
	}
	if s.o.Audience != "" {
		form.Set("audience", s.o.Audience)
	}
	if s.o.Resource != "" {
		form.Set("resource", s.o.Resource)
	}
	if len(s.o.Scopes) > 0 {
		form.Set("scope", scopeParam(s.o.Scopes))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return grant{}, s.describe(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.SetBasicAuth(url.QueryEscape(s.o.ClientID), url.QueryEscape(s.o.ClientSecret))
	resp, err := s.o.HTTPClient.Do(req)
	if err != nil {
		return grant{}, s.describe(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return grant{}, s.describe(err)
	}
	var r exchangeResponse
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	decodeErr := json.Unmarshal(body, &r)
	switch {
	case resp.StatusCode != http.StatusOK:
		return grant{}, s.describe(&OAuthError{Status: resp.StatusCode, Code: cleanCode(r.Error)})
	case decodeErr != nil || (mt != "" && mt != "application/json"):
		return grant{}, s.describe(fmt.Errorf("answered %d bytes that are not a JSON token response", len(body)))
	case r.AccessToken == "":
		return grant{}, s.describe(errors.New("answered no access_token"))
	case !strings.EqualFold(r.TokenType, "Bearer"):
		return grant{}, s.describe(fmt.Errorf("issued token_type %q; only Bearer is supported", sanitize.Clip(sanitize.Text(r.TokenType), 40)))
	case r.IssuedTokenType != "" && r.IssuedTokenType != TokenTypeAccessToken && r.IssuedTokenType != TokenTypeJWT:
		return grant{}, s.describe(fmt.Errorf("issued a token of type %q, not an access token", sanitize.Clip(sanitize.Text(r.IssuedTokenType), 80)))
	}
	return newGrant(r.AccessToken, start, expiresIn(r.ExpiresIn)), nil
}

// expiresIn reads expires_in as a number of seconds, written as a number or, as some servers do, a
// string; 0 when absent or unreadable.
func expiresIn(raw json.RawMessage) time.Duration {
	var n json.Number
	if len(raw) == 0 || json.Unmarshal(raw, &n) != nil {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return 0
		}
		n = json.Number(s)
	}
	secs, err := n.Int64()
	if err != nil || secs <= 0 {
		return 0
	}
	return time.Duration(secs) * time.Second
}
