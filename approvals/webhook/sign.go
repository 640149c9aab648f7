package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// HeaderSignature is "t=<unix seconds>,v1=<hex HMAC-SHA256 of '<t>.<body>' keyed by the secret>".
	HeaderSignature = "X-Toolgate-Signature"
	// HeaderDelivery identifies the delivery: the same on every retry, so a receiver can drop repeats.
	HeaderDelivery = "X-Toolgate-Delivery"
	// HeaderEvent names the event: EventRequested.
	HeaderEvent = "X-Toolgate-Event"
)

// EventRequested is the event of a new approval request.
const EventRequested = "approval.requested"

// DefaultTolerance is how old (or how far in the future) a signature's timestamp Verify accepts.
const DefaultTolerance = 5 * time.Minute

// Sign is the X-Toolgate-Signature value of body sent at t: the timestamp is signed with the body, so
// a captured delivery cannot be replayed later with a fresh timestamp.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + mac(secret, ts, body)
}

func mac(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Errors of Verify.
var (
	ErrNoSignature = errors.New("no valid X-Toolgate-Signature header")
	ErrBadMAC      = errors.New("the signature does not match the body")
	ErrStale       = errors.New("the signature's timestamp is outside the tolerance")
)

// Verify is what a receiver (written in Go) does with a delivery: header is its X-Toolgate-Signature,
// body the exact bytes received, now the receiver's clock. The MAC is compared in constant time; a
// timestamp more than tolerance (0: DefaultTolerance) from now is refused, so a delivery recorded
// by someone on the path is useless after that. Receivers that must refuse even a replay within the
// tolerance keep the X-Toolgate-Delivery ids they have seen for that long.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return ErrStale
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return ErrBadMAC
}
