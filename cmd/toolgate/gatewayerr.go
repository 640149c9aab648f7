package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
)

// Exit codes of the commands that talk to a running gateway with a key (`toolgate call`, `toolgate
// approvals`), beside 0 (done), 1 (the gateway answered and said no: an ok:false envelope, a
// refused decision) and 2 (usage, or an answer that made no sense). A script can tell a key to fix
// from a gateway to start.
const (
	// exitUnreachable: nothing answered at the URL (connection refused, DNS, a timeout).
	exitUnreachable = 3
	// exitKeyRefused: the gateway answered 401 or 403: the key is unknown to it, revoked, or missing.
	exitKeyRefused = 4
)

// authStatus is an http.RoundTripper that remembers whether the gateway ever answered 401 or 403.
// mcp-go turns a 401 into its own error and a 403 to initialize into "likely a legacy SSE server",
// so the status is taken from the wire rather than from its errors.
type authStatus struct {
	base   http.RoundTripper
	status atomic.Int32 // the last 401 or 403; 0 when there was none
}

func (a *authStatus) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		a.status.Store(int32(resp.StatusCode))
	}
	return resp, err
}

// unreachable reports whether err says that nothing answered: a connection that could not be made
// or broke (net.OpError), a name that did not resolve, or a deadline that passed.
func unreachable(err error) bool {
	var op *net.OpError
	var dns *net.DNSError
	var ue *url.Error
	return errors.As(err, &op) || errors.As(err, &dns) || (errors.As(err, &ue) && ue.Timeout()) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
}

// netCause is the innermost useful part of a transport error: "dial tcp 127.0.0.1:1: connect:
// connection refused" rather than mcp-go's and net/url's wrapping around it.
func netCause(err error) error {
	var op *net.OpError
	if errors.As(err, &op) {
		return op
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return errors.New("no answer in time")
	}
	return err
}

// keyRefused prints why the gateway at target refused the key and returns exitKeyRefused. what is
// the command ("toolgate call"), noKey whether none was sent, keyHint where the key comes from.
func keyRefused(errOut io.Writer, what, target string, status int, noKey bool, keyHint string) int {
	if noKey {
		fmt.Fprintf(errOut, "%s: the gateway at %s wants a key (it answered %d): set %s\n", what, target, status, keyHint)
	} else {
		fmt.Fprintf(errOut, "%s: unknown or revoked key for %s (the gateway answered %d; check %s)\n", what, target, status, keyHint)
	}
	return exitKeyRefused
}

// cannotReach prints that nothing answered at target.
func cannotReach(errOut io.Writer, what, target string, err error) {
	fmt.Fprintf(errOut, "%s: cannot reach the gateway at %s: %v\n", what, target, netCause(err))
}

// callFailure chooses the message and exit code of `toolgate call` for err, from the MCP endpoint
// at target: the key refused (exitKeyRefused), nothing answering (exitUnreachable), else 2.
func callFailure(errOut io.Writer, target, key string, seen *authStatus, err error) int {
	const what = "toolgate call"
	switch status := int(seen.status.Load()); {
	case status != 0 || errors.Is(err, transport.ErrAuthorizationRequired):
		if status == 0 {
			status = http.StatusUnauthorized
		}
		return keyRefused(errOut, what, target, status, key == "", "TOOLGATE_KEY or --key against auth.api_keys")
	case unreachable(err):
		cannotReach(errOut, what, target, err)
		return exitUnreachable
	}
	fmt.Fprintln(errOut, what+":", err)
	return 2
}
