package useroauth

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/oauth2"
)

// maxTokenResponse caps what is read of a token endpoint's answer.
const maxTokenResponse = 64 << 10

// tokenResponse is RFC 6749 section 5.1, and the error of section 5.2.
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    int64  `json:"expires_in"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
}

// refreshRequest makes the refresh_token grant (RFC 6749 section 6) with the resource parameter the
// MCP authorization spec asks for on every token request: x/oauth2's TokenSource cannot add one. A
// refusal is an *oauth2.RetrieveError, as x/oauth2's own are.
func (s *Source) refreshRequest(ctx context.Context, d *Discovery, r *Registration, refreshToken string) (*oauth2.Token, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}, "resource": {d.Resource}}
	if r.AuthMethod != authBasic {
		form.Set("client_id", r.ClientID)
	}
	if r.AuthMethod == authPost {
		form.Set("client_secret", r.ClientSecret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.Server.TokenEndpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if r.AuthMethod == authBasic {
		req.SetBasicAuth(url.QueryEscape(r.ClientID), url.QueryEscape(r.ClientSecret))
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return nil, err
	}
	var tr tokenResponse
	decodeErr := json.Unmarshal(body, &tr)
	switch {
	case resp.StatusCode != http.StatusOK:
		return nil, &oauth2.RetrieveError{Response: resp, ErrorCode: tr.Error}
	case decodeErr != nil || tr.AccessToken == "":
		return nil, &oauth2.RetrieveError{Response: resp, ErrorCode: "no access_token in the answer"}
	case !strings.EqualFold(tr.TokenType, "Bearer"):
		return nil, &oauth2.RetrieveError{Response: resp, ErrorCode: "token_type " + clip(tr.TokenType) + " is not Bearer"}
	}
	t := &oauth2.Token{AccessToken: tr.AccessToken, TokenType: "Bearer", RefreshToken: tr.RefreshToken, ExpiresIn: tr.ExpiresIn}
	return t.WithExtra(map[string]any{"scope": tr.Scope}), nil
}
