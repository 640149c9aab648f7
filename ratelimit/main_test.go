package ratelimit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a limiter's sweeper).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
