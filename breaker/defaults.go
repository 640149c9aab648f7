package breaker

import "time"

// The defaults a zero field of Settings or RetrySettings stands for. They are also the defaults of the
// matching config keys (limits.breaker, limits.retry): package config takes them from here, so they are
// written once.
const (
	// DefaultFailures consecutive counted failures (never sent, timed out, broken) open a breaker: 5.
	DefaultFailures = 5
	// DefaultOpenFor is how long an open breaker refuses calls before it admits probes: 30s.
	DefaultOpenFor = 30 * time.Second
	// DefaultHalfOpenProbes calls are admitted while a breaker is half-open: 1.
	DefaultHalfOpenProbes = 1
	// DefaultRetryMaxAttempts is the number of attempts of one retry-safe call, the first included: 3.
	DefaultRetryMaxAttempts = 3
	// DefaultRetryBaseDelay is the backoff before the second attempt, before jitter: 100ms.
	DefaultRetryBaseDelay = 100 * time.Millisecond
	// DefaultRetryMaxDelay caps any one backoff: 2s.
	DefaultRetryMaxDelay = 2 * time.Second
)
