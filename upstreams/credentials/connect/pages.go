package connect

import (
	"context"
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

// beginTimeout bounds discovery and registration when a user presses the button.
const beginTimeout = 20 * time.Second

// Handler serves the pages under Prefix, and the Client ID Metadata Document at its path.
func (l *Links) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+Prefix+"{$}", l.page)
	mux.HandleFunc("POST "+Prefix+"authorize", l.sameSite(l.authorize))
	mux.HandleFunc("GET "+Prefix+"callback", l.callback)
	mux.HandleFunc("POST "+Prefix+"secret", l.sameSite(l.secret))
	if u, err := url.Parse(l.o.ClientMetadataURL); err == nil && l.o.ClientMetadataURL != "" && len(l.o.ClientMetadata) > 0 {
		mux.HandleFunc("GET "+u.EscapedPath(), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(l.o.ClientMetadata)
		})
	}
	return headers(mux)
}

// Paths are the paths Handler serves, for the gateway's mux.
func (l *Links) Paths() []string {
	out := []string{Prefix}
	if u, err := url.Parse(l.o.ClientMetadataURL); err == nil && l.o.ClientMetadataURL != "" {
		out = append(out, u.EscapedPath())
	}
	return out
}

// headers are the pages' security headers: nothing framed, loaded or cached, and no Referer (the
// link's query must not leak to the authorization server).
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		next.ServeHTTP(w, r)
	})
}

// sameSite refuses a form posted from another site. The forms carry only the link's fields, which
// whoever holds a link knows: another site's page posting someone's link from a victim's browser
// would run the authorization there, where a session at the authorization server (and consent given
// before to the gateway's client, which every user shares) sends the code straight back, and store
// the victim's token as that link's principal's. The browser says where a form comes from:
// Sec-Fetch-Site (same-origin, or none: the user's own action), or, from a browser without it, an
// Origin naming this host or "null" (what the pages' Referrer-Policy: no-referrer makes a browser
// send for their own forms). A client that sends neither is not a browser another site can drive.
func (l *Links) sameSite(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !fromThisSite(r, l.base.Load().Host) {
			l.log.Warn("refused a connect form posted from another site", "path", r.URL.Path,
				"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
			l.show(w, http.StatusForbidden, view{Title: "Not connected",
				Message: "this form was sent from another site; nothing was started or stored. Open the link itself."})
			return
		}
		next(w, r)
	}
}

func fromThisSite(r *http.Request, host string) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && (strings.EqualFold(u.Host, host) || strings.EqualFold(u.Host, r.Host))
}

// page shows what the link is for: a button for an oauth upstream, a form for a per_user one.
func (l *Links) page(w http.ResponseWriter, r *http.Request) {
	k, err := l.verify(r.URL.Query())
	if err != nil {
		l.show(w, http.StatusBadRequest, view{Title: "Link not valid", Message: err.Error()})
		return
	}
	v := view{Title: "Connect " + k.upstream, Principal: k.principal, Upstream: k.upstream, Hidden: k.values()}
	_, v.OAuth = l.o.OAuth[k.upstream]
	v.Secret = l.o.Secrets[k.upstream]
	if !v.OAuth && !v.Secret {
		l.show(w, http.StatusNotFound, view{Title: "Nothing to connect", Message: "this upstream does not act as its users"})
		return
	}
	l.show(w, http.StatusOK, v)
}

// authorize starts the authorization request: a sealed state, a cookie binding it to this browser,
// and a redirect to the authorization server.
func (l *Links) authorize(w http.ResponseWriter, r *http.Request) {
	k, err := l.verify(formValues(r))
	if err != nil {
		l.show(w, http.StatusBadRequest, view{Title: "Link not valid", Message: err.Error()})
		return
	}
	flow, ok := l.o.OAuth[k.upstream]
	if !ok {
		l.show(w, http.StatusNotFound, view{Title: "Nothing to connect", Message: "this upstream does not use OAuth"})
		return
	}
	expires := l.now().Add(l.o.StateTTL)
	st := state{Principal: k.principal, Upstream: k.upstream, Verifier: oauth2.GenerateVerifier(), Nonce: randomString(24),
		Expires: expires.Unix()}
	ctx, cancel := context.WithTimeout(r.Context(), beginTimeout)
	defer cancel()
	to, err := flow.Begin(ctx, k.principal, st.Verifier, func(issuer string) string {
		st.Issuer = issuer
		return l.seal(st)
	})
	if err != nil {
		l.log.Warn("could not start an authorization request", "server", k.upstream, "principal", k.principal, "err", err.Error())
		l.show(w, http.StatusBadGateway, view{Title: "Cannot connect " + k.upstream,
			Message: "the upstream's authorization server could not be reached or used; the gateway's log says why"})
		return
	}
	if !l.useLink(w, r, k) { // taken once Begin worked: a server that is down does not use up the link
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName(st.Nonce), Value: st.Nonce, Path: Prefix + "callback", Expires: expires,
		HttpOnly: true, Secure: l.secure(), SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// callback takes the authorization server's answer: the state checked (sealed here, not expired,
// from this browser, never taken before), then the code exchanged and the tokens stored.
func (l *Links) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st, err := l.open(q.Get("state"))
	if err == nil {
		err = l.bound(r, st)
	}
	if err != nil {
		l.log.Warn("refused an authorization callback", "reason", err.Error())
		l.show(w, http.StatusBadRequest, view{Title: "Not connected", Message: errBadState.Error()})
		return
	}
	clearCookie(w, st, l.secure())
	flow, ok := l.o.OAuth[st.Upstream]
	switch {
	case !ok:
		l.show(w, http.StatusNotFound, view{Title: "Nothing to connect", Message: "this upstream no longer uses OAuth"})
		return
	case q.Get("error") != "":
		l.log.Info("a user's authorization ended without a code", "server", st.Upstream, "principal", st.Principal)
		l.show(w, http.StatusOK, view{Title: "Not connected", Message: "the authorization was not granted; nothing was stored"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), beginTimeout)
	defer cancel()
	if err := flow.Complete(ctx, st.Principal, st.Issuer, q.Get("code"), st.Verifier); err != nil {
		l.log.Warn("could not complete an authorization", "server", st.Upstream, "principal", st.Principal, "err", err.Error())
		l.show(w, http.StatusBadGateway, view{Title: "Not connected", Message: "the authorization server did not issue a token; the gateway's log says why"})
		return
	}
	l.show(w, http.StatusOK, view{Title: "Connected", Message: "toolgate now acts as you on " + st.Upstream +
		" for principal " + st.Principal + ". Go back and repeat the call."})
}

// errNotThisBrowser and errReplayed are why a sealed, unexpired state is still refused.
var (
	errNotThisBrowser = errors.New("the callback came from a browser that did not start the request (no cookie)")
	errReplayed       = errors.New("the state was already used")
)

func (l *Links) bound(r *http.Request, st state) error {
	c, err := r.Cookie(cookieName(st.Nonce))
	if err != nil || c.Value != st.Nonce {
		return errNotThisBrowser
	}
	if !l.take(st.Nonce, time.Unix(st.Expires, 0)) {
		return errReplayed
	}
	return nil
}

func clearCookie(w http.ResponseWriter, st state, secure bool) {
	http.SetCookie(w, &http.Cookie{Name: cookieName(st.Nonce), Value: "", Path: Prefix + "callback", MaxAge: -1,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteLaxMode})
}

// secret stores the secret a user pasted for a per_user upstream.
func (l *Links) secret(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxSecretBytes)
	v := formValues(r)
	k, err := l.verify(v)
	if err != nil {
		l.show(w, http.StatusBadRequest, view{Title: "Link not valid", Message: err.Error()})
		return
	}
	secret := strings.TrimSpace(v.Get("secret"))
	switch {
	case !l.o.Secrets[k.upstream]:
		l.show(w, http.StatusNotFound, view{Title: "Nothing to connect", Message: "this upstream does not take a user's secret"})
		return
	case secret == "":
		l.show(w, http.StatusBadRequest, view{Title: "Nothing stored", Message: "the secret was empty"})
		return
	case vault.CheckSecret([]byte(secret)) != nil:
		l.show(w, http.StatusBadRequest, view{Title: "Nothing stored", Message: "the secret holds characters a request header cannot carry"})
		return
	}
	if !l.useLink(w, r, k) {
		return
	}
	e := vault.Entry{Key: vault.Key{Principal: k.principal, Upstream: k.upstream, Kind: vault.Secret}, Updated: l.now(), Source: "user"}
	if err := l.o.Vault.Put(r.Context(), e, []byte(secret)); err != nil {
		l.log.Error("could not store a user's secret", "server", k.upstream, "principal", k.principal, "err", err.Error())
		l.show(w, http.StatusInternalServerError, view{Title: "Nothing stored", Message: "the secret could not be stored; the gateway's log says why"})
		return
	}
	l.log.Info("a user stored their secret for an upstream", "server", k.upstream, "principal", k.principal)
	l.show(w, http.StatusOK, view{Title: "Connected", Message: "your secret for " + k.upstream + " is stored. Go back and repeat the call."})
}

// useLink takes k for this request, or answers why it cannot: used before (400), or the store that
// remembers used links failed (503).
func (l *Links) useLink(w http.ResponseWriter, r *http.Request, k link) bool {
	ok, err := l.takeLink(r.Context(), k)
	switch {
	case err != nil:
		l.log.Error("could not record a connect link as used; nothing was started or stored", "server", k.upstream,
			"principal", k.principal, "err", err.Error())
		l.show(w, http.StatusServiceUnavailable, view{Title: "Not connected", Message: "the link could not be checked; try again shortly"})
	case !ok:
		l.log.Warn("refused a connect link used before", "server", k.upstream, "principal", k.principal, "remote", r.RemoteAddr)
		l.show(w, http.StatusBadRequest, view{Title: "Link already used", Message: errUsedLink.Error()})
	}
	return ok && err == nil
}

// formValues is r's form, or nothing when it cannot be read (too large, not a form).
func formValues(r *http.Request) url.Values {
	if err := r.ParseForm(); err != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		return url.Values{}
	}
	return r.PostForm
}

// view is what a page shows.
type view struct {
	Title, Message      string
	Principal, Upstream string
	OAuth, Secret       bool
	Hidden              url.Values
}

func (l *Links) show(w http.ResponseWriter, status int, v view) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, v)
}

var pageTemplate = template.Must(template.New("connect").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} · toolgate</title>
<style>body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;line-height:1.5}
button{font-size:1rem;padding:.5rem 1rem}input{font-size:1rem;width:100%;padding:.4rem}</style></head>
<body><h1>{{.Title}}</h1>
{{with .Message}}<p>{{.}}</p>{{end}}
{{if .Upstream}}<p>toolgate asks to act as you on <strong>{{.Upstream}}</strong> for the toolgate principal
<strong>{{.Principal}}</strong>. Continue only if you are {{.Principal}}: whatever you grant here, calls made as
{{.Principal}} can use.</p>{{end}}
{{if .OAuth}}<form method="post" action="authorize">{{range $k, $v := .Hidden}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">{{end}}
<button type="submit">Connect {{.Upstream}}</button></form>{{end}}
{{if .Secret}}<form method="post" action="secret">{{range $k, $v := .Hidden}}<input type="hidden" name="{{$k}}" value="{{index $v 0}}">{{end}}
<p><label>Your credential for {{.Upstream}}<br><input type="password" name="secret" autocomplete="off" required></label></p>
<button type="submit">Store it</button></form>{{end}}
</body></html>
`))
