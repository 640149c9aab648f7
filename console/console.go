package console

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/authz"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Prefix is where the console is mounted on the admin listener.
const Prefix = "/ui/"

// Approver is one person who may sign in: the name decisions are recorded under (and the principal
// the policy's approve lines are asked about) and the SHA-256 hex of their sign-in key.
type Approver struct {
	Name      string
	KeySHA256 string
}

// Options are what the console needs. Store and Policy are required.
type Options struct {
	Store  approvals.Store      // the approvals, decided through Approve and Deny as the admin API does
	Policy func() *authz.Policy // the policy in force, asked about the approve action
	// Approvers may sign in. Without any, nobody can.
	Approvers []Approver
	// RuleText, optional, returns the text of the policy line a request names ("policy.csv:12"), as
	// the file reads now, or "" when it cannot say.
	RuleText   func(ref string) string
	Sessions   Sessions      // nil: NewMemorySessions
	SessionTTL time.Duration // how long a sign-in lasts; 0: 8 hours
	Log        *slog.Logger
	Now        func() time.Time // nil: time.Now
	Pages                       // the pages beside approvals (pages.go)
	// OIDC, optional, lets approvers sign in with an OpenID Provider (oidc.go); an approver without
	// a key hash then signs in there only.
	OIDC *OIDC
	// PublicURL, optional, is the console's address as approvers reach it (console.public_url).
	// When it, or OIDC's RedirectURL, is https, every cookie is Secure even on a request that
	// arrived in plain HTTP: a TLS-terminating proxy in front hands the gateway plain HTTP, and
	// a cookie without Secure would also go out on any http:// request to that host.
	PublicURL string
}

// Console serves /ui/. It is safe for concurrent use.
type Console struct {
	o Options
	// approvers are the approvers in force: Options.Approvers, then what SetApprovers swapped in.
	approvers atomic.Pointer[approverSet]
	limiter   *limiter
	pages     *template.Template
	mux       *http.ServeMux
	// verifying lets one audit verification run at a time: it reads the whole trail (up to
	// max_files files of max_bytes each), and a few clicks must not read it many times over at once.
	verifying sync.Mutex
	oidc      *oidcSignIn // nil without Options.OIDC
	// httpsAddress: the configured address is https (Options.PublicURL), so cookies are Secure
	// whatever the request's own scheme.
	httpsAddress bool
}

// Limits of what a page shows.
const (
	// MaxDecidedShown is how many decided requests the page lists, newest first.
	MaxDecidedShown = 50
	// MaxPendingShown is how many pending requests one page shows, oldest first (?from=N pages on):
	// a browser lays out 1,000 decision forms in about 2 s on a small machine, 100 in a tenth of it.
	MaxPendingShown = 100
	// maxArgsShown caps the pretty-printed arguments of one request on the page, in bytes; the rest
	// is cut with a note (the digest still names the whole).
	maxArgsShown = 16 << 10
	// maxReason caps a deny reason, as approvals does.
	maxReason = 1024
	// maxForm caps a POST body.
	maxForm = 16 << 10
)

// Cookie names. The session cookie is scoped to /ui/; the sign-in cookie carries the sign-in form's
// CSRF token before there is a session.
const (
	sessionCookie = "tg_console"
	signinCookie  = "tg_console_signin"
)

// CSP is the Content-Security-Policy of every answer: the page loads its own stylesheet and nothing
// else, runs no script (script-src 'self' admits only files of the console, and it has none), posts
// forms only to itself, and cannot be framed.
const CSP = "default-src 'none'; style-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// New builds the console.
func New(o Options) (*Console, error) {
	if o.Store == nil || o.Policy == nil {
		return nil, errors.New("console: a Store and a Policy are required")
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Sessions == nil {
		o.Sessions = NewMemorySessions(o.Now)
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = 8 * time.Hour
	}
	c := &Console{o: o, limiter: newLimiter(), httpsAddress: isHTTPS(o.PublicURL) || o.OIDC != nil && isHTTPS(o.OIDC.RedirectURL)}
	if o.OIDC != nil {
		c.oidc = newOIDCSignIn(*o.OIDC, o.Now)
	}
	if err := c.SetApprovers(o.Approvers); err != nil {
		return nil, err
	}
	pages, err := template.New("").Funcs(template.FuncMap{
		"ago":   func(d time.Duration) string { return human(d) },
		"stamp": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"iso":   func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"clock": func(t time.Time) string { return t.UTC().Format("15:04:05") },
	}).ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	c.pages = pages
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", staticFiles(static)))
	mux.HandleFunc("GET /ui/signin", c.signinPage)
	mux.HandleFunc("POST /ui/signin", c.signin)
	mux.HandleFunc("POST /ui/signout", c.withSession(c.signout))
	mux.HandleFunc("GET /ui/{$}", c.withSession(func(w http.ResponseWriter, r *http.Request, _ *Session) {
		http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
	}))
	mux.HandleFunc("GET /ui/approvals", c.withSession(c.approvalsPage))
	mux.HandleFunc("POST /ui/approvals/{id}", c.withSession(c.decide))
	c.routePages(mux)
	if c.oidc != nil {
		mux.HandleFunc("GET /ui/oidc/start", c.oidcStart)
		mux.HandleFunc("GET /ui/oidc/callback", c.oidcCallback)
	}
	mux.HandleFunc("/ui/", c.withSession(func(w http.ResponseWriter, r *http.Request, s *Session) {
		c.render(w, r, http.StatusNotFound, "message", c.base(r, s, "Not found", "There is no such page in the console."))
	}))
	c.mux = mux
	return c, nil
}

// ServeHTTP serves /ui/ with the security headers on every answer.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
		if !sameOrigin(r) {
			c.o.Log.Warn("console: cross-origin POST refused", "remote", r.RemoteAddr, "path", r.URL.Path, "origin", r.Header.Get("Origin"))
			c.render(w, r, http.StatusForbidden, "message", page{Title: "Refused", Message: "This form was posted from another site; nothing was done."})
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// sameOrigin refuses a POST that the browser says comes from another site. Sec-Fetch-Site, where
// the browser sends it, must be same-origin (or none: typed by the user). Without it, an Origin
// header must name this host, unless it is "null", which is what browsers send for the console's
// own forms under Referrer-Policy: no-referrer. What passes still needs the form's CSRF token,
// which every POST must carry anyway.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" {
		return site == "same-origin" || site == "none"
	}
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host
}

func staticFiles(fsys fs.FS) http.Handler {
	files := http.FileServerFS(fsys)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") || r.URL.Path == "" {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=300")
		files.ServeHTTP(w, r)
	})
}

// page is what every template gets.
type page struct {
	Title    string
	Approver string // "" on the sign-in page
	CSRF     string
	Error    string // a refusal, shown at the top
	Notice   string // a success, shown at the top
	Message  string // the message page's text
	SSO      string // the sign-in page: the OpenID Provider's host, when OIDC sign-in is on
	Keys     bool   // the sign-in page: some approver signs in with a key
	Refresh  int    // seconds after which the page reloads itself (a followed list); 0: never

	// The approvals page.
	Pending      []row
	PendingTotal int
	Shown        string // which of the pending requests the page shows, when not all
	Prev, Next   string // links to the previous and next pending requests
	Only         string // the one pending request shown (?id=), with a link to all
	Decided      []row
	Now          time.Time
}

// row is one request as the page shows it. Every string comes from the request and is escaped by
// html/template where it is used.
type row struct {
	ID         string
	Principal  string
	Tool       string
	Args       string // pretty-printed canonical arguments
	ArgsCut    int    // bytes of Args left out
	Digest     string // sha256:<hex> the approval binds to
	Rule       string // "policy.csv:12"
	RuleText   string // the line's text as the file reads now
	RuleDigest string // the version of the rule the decision is bound to
	Age        time.Duration
	CreatedAt  time.Time
	ExpiresIn  time.Duration
	ExpiresAt  time.Time
	State      string
	DecidedBy  string
	DecidedAt  time.Time
	Reason     string
	MayDecide  bool
	WhyNot     string // why this approver may not decide it
	SelfMadeIt bool
}

func (c *Console) base(_ *http.Request, s *Session, title, msg string) page {
	p := page{Title: title, Message: msg, Now: c.o.Now()}
	if s != nil {
		p.Approver, p.CSRF = s.Approver, s.CSRF
	}
	return p
}

func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p any) {
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, name, p); err != nil {
		c.o.Log.Error("console: page not rendered", "page", name, "err", err)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("the console failed to render this page; see the gateway log\n"))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	if buf.Len() > 4096 && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		// A long list compresses about 15 to 1 (a page of 100 pending requests: 161 KB, 11 KB gzipped).
		h.Set("Content-Encoding", "gzip")
		w.WriteHeader(status)
		gz := gzip.NewWriter(w)
		_, _ = gz.Write(buf.Bytes())
		_ = gz.Close()
		return
	}
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// --- sessions and sign-in ---

func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func storeKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// session returns the request's session, or nil.
func (c *Console) session(r *http.Request) (*Session, error) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil || ck.Value == "" || len(ck.Value) > 128 {
		return nil, nil
	}
	s, ok, err := c.o.Sessions.Get(r.Context(), storeKey(ck.Value), c.o.Now())
	if err != nil || !ok {
		return nil, err
	}
	if !c.approvers.Load().holds(&s) {
		// Removed from console.approvers, or their key replaced, since they signed in.
		_ = c.o.Sessions.Delete(r.Context(), storeKey(ck.Value))
		c.o.Log.Info("console: session ended: the approver or their key is no longer configured", "approver", s.Approver)
		return nil, nil
	}
	return &s, nil
}

// withSession serves h only with a session. Without one, a GET goes to the sign-in page and a POST
// is refused: nothing is done for a request nobody signed in for.
func (c *Console) withSession(h func(http.ResponseWriter, *http.Request, *Session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s, err := c.session(r)
		if err != nil {
			c.o.Log.Error("console: sessions", "err", err)
			c.render(w, r, http.StatusServiceUnavailable, "message", page{Title: "Unavailable", Message: "Sessions cannot be read right now; try again."})
			return
		}
		if s == nil {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusForbidden, "message", page{Title: "Sign in first", Message: "You are not signed in (or your session ended); nothing was done. Sign in and try again."})
			return
		}
		if r.Method == http.MethodPost {
			if err := r.ParseForm(); err != nil {
				c.render(w, r, http.StatusBadRequest, "message", c.base(r, s, "Bad request", "The form could not be read; nothing was done."))
				return
			}
			if !tokenEqual(r.PostForm.Get("csrf"), s.CSRF) {
				c.o.Log.Warn("console: POST without a valid CSRF token refused", "approver", s.Approver, "remote", r.RemoteAddr, "path", r.URL.Path)
				c.render(w, r, http.StatusForbidden, "message", c.base(r, s, "Refused", "This form is not one the console gave you (its security token is missing or wrong); nothing was done. Reload the page and try again."))
				return
			}
		}
		h(w, r, s)
	}
}

func tokenEqual(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// secure is whether cookies carry Secure: served over TLS, or reached at an https address through a
// proxy that terminates TLS.
func (c *Console) secure(r *http.Request) bool { return r.TLS != nil || c.httpsAddress }

func isHTTPS(raw string) bool {
	u, err := url.Parse(raw)
	return err == nil && strings.EqualFold(u.Scheme, "https")
}

func (c *Console) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure(r)})
}

func (c *Console) signinPage(w http.ResponseWriter, r *http.Request) {
	if s, _ := c.session(r); s != nil {
		http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
		return
	}
	c.signinForm(w, r, http.StatusOK, "")
}

// signinForm renders the sign-in page with a fresh pre-session token, in a cookie and in the form.
func (c *Console) signinForm(w http.ResponseWriter, r *http.Request, status int, problem string) {
	token := randomToken()
	c.setCookie(w, r, signinCookie, token, 3600)
	p := page{Title: "Sign in", CSRF: token, Error: problem}
	if c.oidc != nil {
		p.SSO = c.oidc.ssoLabel()
	}
	p.Keys = c.approvers.Load().anyKey()
	c.render(w, r, status, "signin", p)
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (c *Console) signin(w http.ResponseWriter, r *http.Request) {
	now := c.o.Now()
	addr := remoteHost(r)
	if blocked, until := c.limiter.blocked(addr, now); blocked {
		w.Header().Set("Retry-After", fmt.Sprint(int(until.Sub(now).Seconds())+1))
		c.signinForm(w, r, http.StatusTooManyRequests, "Too many failed sign-ins from your address; try again in "+human(until.Sub(now))+".")
		return
	}
	if err := r.ParseForm(); err != nil {
		c.signinForm(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	ck, err := r.Cookie(signinCookie)
	if err != nil || !tokenEqual(r.PostForm.Get("csrf"), ck.Value) {
		c.o.Log.Warn("console: sign-in without a valid CSRF token refused", "remote", r.RemoteAddr)
		c.signinForm(w, r, http.StatusForbidden, "This sign-in form is not one the console gave you, or it is too old; try again.")
		return
	}
	name, key, ok := c.approvers.Load().match(strings.TrimSpace(r.PostForm.Get("key")))
	if !ok {
		c.limiter.fail(addr, now)
		c.o.Log.Warn("console: failed sign-in", "remote", r.RemoteAddr)
		c.signinForm(w, r, http.StatusUnauthorized, "That is not an approver's key.")
		return
	}
	if err := c.begin(w, r, name, "key", key); err != nil {
		c.o.Log.Error("console: session not created", "approver", name, "err", err)
		c.signinForm(w, r, http.StatusServiceUnavailable, "You could not be signed in right now; try again.")
		return
	}
	http.Redirect(w, r, "/ui/approvals", http.StatusSeeOther)
}

// begin starts a session for name, however they proved who they are (method: "key", with the key's
// fingerprint keyID; or "oidc", with the name its ID token established), and sets its cookie.
func (c *Console) begin(w http.ResponseWriter, r *http.Request, name, method, keyID string) error {
	if old, err := r.Cookie(sessionCookie); err == nil && old.Value != "" {
		_ = c.o.Sessions.Delete(r.Context(), storeKey(old.Value)) // a sign-in always gets a new id
	}
	id := randomToken()
	now := c.o.Now()
	s := Session{Approver: name, Method: method, KeyID: keyID, CSRF: randomToken(), Created: now, Expires: now.Add(c.o.SessionTTL)}
	if err := c.o.Sessions.Put(r.Context(), storeKey(id), s); err != nil {
		return err
	}
	c.setCookie(w, r, sessionCookie, id, int(c.o.SessionTTL.Seconds()))
	c.setCookie(w, r, signinCookie, "", -1)
	c.o.Log.Info("console: signed in", "approver", name, "method", method, "remote", r.RemoteAddr)
	return nil
}

func (c *Console) signout(w http.ResponseWriter, r *http.Request, s *Session) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		_ = c.o.Sessions.Delete(r.Context(), storeKey(ck.Value))
	}
	c.setCookie(w, r, sessionCookie, "", -1)
	c.o.Log.Info("console: signed out", "approver", s.Approver)
	http.Redirect(w, r, "/ui/signin", http.StatusSeeOther)
}

// --- approvals ---

func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, s *Session) {
	p := c.base(r, s, "Approvals", "")
	if id := r.URL.Query().Get("done"); id != "" {
		if req, err := c.o.Store.Get(id); err == nil && req.DecidedBy == s.Approver {
			verb := "approved"
			if req.State == approvals.StateDenied {
				verb = "denied"
			}
			p.Notice = fmt.Sprintf("You %s %s's call of %s (request %s).", verb, req.Principal, req.Tool, req.ID)
		}
	}
	c.renderApprovals(w, r, s, http.StatusOK, p)
}

// renderApprovals lists the requests into p and renders the approvals page.
func (c *Console) renderApprovals(w http.ResponseWriter, r *http.Request, s *Session, status int, p page) {
	all, err := c.o.Store.List(approvals.StatePending, approvals.StateApproved, approvals.StateDenied, approvals.StateUsed)
	if err != nil {
		// Never an empty list: the approver would read that nothing waits.
		c.o.Log.Error("console: approvals not listed", "err", err)
		p.Error = "The approvals cannot be read right now, so what is waiting cannot be shown; try again."
		c.render(w, r, http.StatusServiceUnavailable, "approvals", p)
		return
	}
	now := c.o.Now()
	pol := c.o.Policy()
	var pending, decided []approvals.Request
	for _, req := range all {
		if req.State == approvals.StatePending {
			pending = append(pending, req)
			continue
		}
		if req.DecidedBy != "" {
			decided = append(decided, req)
		}
	}
	if id := r.URL.Query().Get("id"); id != "" {
		pending = onlyRequest(&p, pending, all, id)
	}
	p.PendingTotal = len(pending)
	from, _ := strconv.Atoi(r.URL.Query().Get("from"))
	from = max(0, min(from, len(pending)-1))
	to := min(len(pending), from+MaxPendingShown)
	for _, req := range pending[from:to] {
		p.Pending = append(p.Pending, c.row(req, now, s, pol))
	}
	if from > 0 || to < len(pending) {
		p.Shown = fmt.Sprintf("%d to %d of %d, oldest first", from+1, to, len(pending))
		if from > 0 {
			p.Prev = fmt.Sprintf("/ui/approvals?from=%d", max(0, from-MaxPendingShown))
		}
		if to < len(pending) {
			p.Next = fmt.Sprintf("/ui/approvals?from=%d", to)
		}
	}
	slices.SortStableFunc(decided, func(a, b approvals.Request) int { return b.DecidedAt.Compare(a.DecidedAt) })
	for _, req := range decided[:min(len(decided), MaxDecidedShown)] {
		p.Decided = append(p.Decided, c.row(req, now, s, nil))
	}
	c.render(w, r, status, "approvals", p)
}

// onlyRequest narrows the pending requests to the one with id (the link a webhook sends, which stays
// valid whichever page the request would be on), and says so, or says what became of it.
func onlyRequest(p *page, pending, all []approvals.Request, id string) []approvals.Request {
	for _, req := range pending {
		if req.ID == id {
			p.Only = id
			return []approvals.Request{req}
		}
	}
	for _, req := range all {
		if req.ID == id {
			p.Notice = notPending(req)
			p.Notice = strings.TrimSuffix(p.Notice, "; nothing was decided.") + "."
			return pending
		}
	}
	p.Notice = "Request " + id + " is not waiting: it expired, or is unknown here. All pending requests are below."
	return pending
}

func (c *Console) row(req approvals.Request, now time.Time, s *Session, pol *authz.Policy) row {
	rw := row{ID: req.ID, Principal: req.Principal, Tool: req.Tool, Digest: "sha256:" + req.ArgsHash, RuleDigest: req.RuleDigest,
		Rule: shortRule(req.Rule), Age: now.Sub(req.CreatedAt), CreatedAt: req.CreatedAt,
		ExpiresIn: req.ExpiresAt.Sub(now), ExpiresAt: req.ExpiresAt, State: string(req.State),
		DecidedBy: req.DecidedBy, DecidedAt: req.DecidedAt, Reason: req.Reason}
	rw.Args = pretty(req.Args)
	if len(rw.Args) > maxArgsShown {
		rw.ArgsCut = len(rw.Args) - maxArgsShown
		rw.Args = strings.ToValidUTF8(rw.Args[:maxArgsShown], "")
	}
	if c.o.RuleText != nil && req.Rule != "" {
		rw.RuleText = c.o.RuleText(req.Rule)
	}
	if req.State == approvals.StatePending {
		rw.WhyNot = c.mayDecide(req, s.Approver, pol)
		rw.MayDecide = rw.WhyNot == ""
		rw.SelfMadeIt = req.Principal == s.Approver
	}
	return rw
}

// mayDecide is "" when approver may decide req, else why not: nobody decides a request they made,
// and the policy must allow the approver the approve action on the tool, for these arguments.
func (c *Console) mayDecide(req approvals.Request, approver string, pol *authz.Policy) string {
	if req.Principal == approver {
		return "You made this call, so you cannot decide it: another approver must."
	}
	if pol == nil {
		return "No policy is loaded, so nobody may decide it."
	}
	if approvals.RuleInForce(req, pol) != nil {
		return "The policy no longer has the rule that held this call (" + shortRule(req.Rule) + " as it read then), so it cannot be decided here: if the call still needs an approval, the agent's repeat asks for a new one under the rule in force."
	}
	d := pol.Decide(authz.Request{Subject: authz.Subject{Principal: approver}, Object: req.Tool, Action: authz.ActApprove, Args: req.Args})
	if !d.Allowed {
		return "The policy does not let you approve " + req.Tool + " calls like this one (no approve line for you or your roles applies)."
	}
	return ""
}

func (c *Console) decide(w http.ResponseWriter, r *http.Request, s *Session) {
	id := r.PathValue("id")
	decision := r.PostForm.Get("decision")
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if len(reason) > maxReason {
		reason = strings.ToValidUTF8(reason[:maxReason], "")
	}
	refuse := func(status int, msg string) {
		p := c.base(r, s, "Approvals", "")
		p.Error = msg
		c.renderApprovals(w, r, s, status, p)
	}
	if decision != "approve" && decision != "deny" {
		refuse(http.StatusBadRequest, "Choose approve or deny; nothing was decided.")
		return
	}
	req, err := c.o.Store.Get(id)
	switch {
	case errors.Is(err, approvals.ErrNotFound):
		refuse(http.StatusNotFound, "There is no request "+id+"; nothing was decided.")
		return
	case err != nil:
		c.o.Log.Error("console: approvals store", "err", err)
		refuse(http.StatusServiceUnavailable, "The approvals cannot be read right now; nothing was decided. Try again.")
		return
	}
	if req.State != approvals.StatePending {
		refuse(http.StatusConflict, notPending(req))
		return
	}
	pol := c.o.Policy()
	if pol != nil && approvals.RuleInForce(req, pol) != nil {
		refuse(http.StatusConflict, "Request "+id+": the policy changed and no longer has the rule that held this call; nothing was decided. If the call still needs an approval, the agent's repeat asks for a new one.")
		return
	}
	if why := c.mayDecide(req, s.Approver, pol); why != "" {
		c.o.Log.Warn("console: decision refused", "approver", s.Approver, "id", req.ID, "principal", req.Principal, "tool", req.Tool, "why", why)
		refuse(http.StatusForbidden, "Request "+req.ID+": "+why+" Nothing was decided.")
		return
	}
	if decision == "approve" {
		req, err = c.o.Store.Approve(id, s.Approver)
	} else {
		req, err = c.o.Store.Deny(id, s.Approver, reason)
	}
	switch {
	case errors.Is(err, approvals.ErrExpired):
		refuse(http.StatusConflict, "Request "+id+" expired before it was decided; nothing was decided. The agent must make the call again.")
		return
	case errors.Is(err, approvals.ErrNotPending):
		refuse(http.StatusConflict, "Request "+id+" was decided meanwhile (by someone else); nothing was decided.")
		return
	case errors.Is(err, approvals.ErrRuleGone):
		refuse(http.StatusConflict, "Request "+id+": the policy changed meanwhile and no longer has the rule that held this call; nothing was decided.")
		return
	case errors.Is(err, approvals.ErrNotFound):
		refuse(http.StatusNotFound, "There is no request "+id+"; nothing was decided.")
		return
	case err != nil:
		c.o.Log.Error("console: approvals store", "err", err)
		refuse(http.StatusServiceUnavailable, "The approvals store failed; nothing was decided. Try again.")
		return
	}
	c.o.Log.Info("approval decided", "id", req.ID, "state", req.State, "by", req.DecidedBy,
		"principal", req.Principal, "tool", req.Tool, "rule", req.Rule, "via", "console")
	http.Redirect(w, r, "/ui/approvals?done="+url.QueryEscape(req.ID), http.StatusSeeOther)
}

func notPending(req approvals.Request) string {
	switch req.State {
	case approvals.StateExpired:
		return "Request " + req.ID + " has expired; nothing was decided. The agent must make the call again."
	case approvals.StateApproved, approvals.StateUsed:
		return "Request " + req.ID + " was already approved by " + cmp.Or(req.DecidedBy, "someone") + "; nothing was decided."
	case approvals.StateDenied:
		return "Request " + req.ID + " was already denied by " + cmp.Or(req.DecidedBy, "someone") + "; nothing was decided."
	}
	return "Request " + req.ID + " is " + string(req.State) + "; nothing was decided."
}

// pretty indents canonical JSON arguments for reading; what is not JSON is shown as it is.
func pretty(args json.RawMessage) string {
	if len(args) == 0 {
		return "{}"
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, args, "", "  "); err != nil {
		return string(args)
	}
	return buf.String()
}

// shortRule shows "/etc/toolgate/policy.csv:12" as "policy.csv:12".
func shortRule(ref string) string {
	file, line, ok := cutLast(ref, ":")
	if !ok {
		return ref
	}
	return filepath.Base(file) + ":" + line
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

// human is a short duration: 45s, 12m, 3h 5m, 2d 4h.
func human(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
