package testauthserver

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// UpstreamRole is the environment variable that makes a test binary run UpstreamMain: set it to the
// authorization server's issuer.
const UpstreamRole = "TOOLGATE_TEST_OAUTH_UPSTREAM"

// UpstreamMain runs an Upstream as a process of its own: it checks each token by introspection
// (RFC 7662) at the issuer in UpstreamRole, writes "LISTENING <url>" on stdout once it accepts
// connections, and serves until stdin ends.
func UpstreamMain() int {
	issuer := os.Getenv(UpstreamRole)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	client := &http.Client{Timeout: 10 * time.Second}
	_, h, handler := newUpstream(issuer, func(token, audience string) (string, error) { return introspect(client, issuer, token, audience) })
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("LISTENING http://%s/mcp\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = h.Shutdown(context.Background())
	_ = srv.Close()
	return 0
}

// introspect asks the issuer whether token is active and for audience; its subject when it is.
func introspect(c *http.Client, issuer, token, audience string) (string, error) {
	resp, err := c.PostForm(issuer+"/introspect", url.Values{"token": {token}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
		Aud    string `json:"aud"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	if !r.Active || r.Aud != audience {
		return "", errors.New("token not active for this audience")
	}
	return r.Sub, nil
}

// StartUpstreamProcess runs UpstreamMain in a child process of the test binary (whose TestMain must
// divert to it when UpstreamRole is set), with as as its authorization server; it ends with the test.
// Subjects is not available on the returned Upstream: the process keeps its own.
func StartUpstreamProcess(t testing.TB, as *Server) *Upstream {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), UpstreamRole+"="+as.Issuer, "GORACE=atexit_sleep_ms=0")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = stdin.Close() // the process ends when its stdin does
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	u, ok := strings.CutPrefix(strings.TrimSpace(line), "LISTENING ")
	if err != nil || !ok {
		t.Fatalf("the upstream process said %q: %v", line, err)
	}
	return &Upstream{URL: u}
}
