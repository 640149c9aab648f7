package testauthserver

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync"
)

// Browser is what a user's browser does with a connect link: it keeps cookies, follows redirects,
// presses the gateway's connect button and signs in at the authorization server. It records the
// callback it was sent to, with the cookies it sent there, so a test can replay it.
type Browser struct {
	c   *http.Client
	jar *recordingJar
	// Callback is the last gateway callback URL followed (with code and state), Cookies what was sent.
	Callback string
}

// NewBrowser is a browser with no cookies.
func NewBrowser() *Browser {
	jar, _ := cookiejar.New(nil)
	b := &Browser{jar: &recordingJar{Jar: jar}}
	b.c = &http.Client{Jar: b.jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasSuffix(req.URL.Path, "/connect/callback") {
			b.Callback = req.URL.String()
		}
		return nil
	}}
	return b
}

// CallbackCookies are the cookies the browser sent with its last callback.
func (b *Browser) CallbackCookies() []*http.Cookie {
	b.jar.mu.Lock()
	defer b.jar.mu.Unlock()
	return b.jar.callback
}

type recordingJar struct {
	Jar      http.CookieJar
	mu       sync.Mutex
	callback []*http.Cookie
}

func (j *recordingJar) SetCookies(u *url.URL, cs []*http.Cookie) { j.Jar.SetCookies(u, cs) }

func (j *recordingJar) Cookies(u *url.URL) []*http.Cookie {
	cs := j.Jar.Cookies(u)
	if strings.HasSuffix(u.Path, "/connect/callback") {
		j.mu.Lock()
		j.callback = cs
		j.mu.Unlock()
	}
	return cs
}

// Get fetches u; the body is read whole.
func (b *Browser) Get(u string, cookies ...*http.Cookie) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	return b.do(req)
}

func (b *Browser) do(req *http.Request) (int, string, error) {
	resp, err := b.c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func (b *Browser) postForm(u string, form url.Values) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return b.do(req)
}

// Connect opens link, presses its connect button, signs in as user at the authorization server
// (whose login form it fills in at as), and follows the redirects back to the gateway: the last
// page's status and body.
func (b *Browser) Connect(link, user string, as *Server) (int, string, error) {
	status, page, err := b.Get(link)
	if err != nil || status != http.StatusOK {
		return status, page, err
	}
	if !strings.Contains(page, `action="authorize"`) {
		return status, page, fmt.Errorf("the connect page has no connect button")
	}
	lu, err := url.Parse(link)
	if err != nil {
		return 0, "", err
	}
	authorize := lu.Scheme + "://" + lu.Host + strings.TrimSuffix(lu.Path, "/") + "/authorize"
	status, login, err := b.postForm(authorize, lu.Query())
	if err != nil || status != http.StatusOK {
		return status, login, err
	}
	req, ok := LoginRequest(login)
	if !ok {
		return status, login, fmt.Errorf("no login form where the authorization request led")
	}
	return b.postForm(as.Issuer+"/login", url.Values{"request": {req}, "username": {user}})
}
