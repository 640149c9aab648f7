package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a session, a stream writer, a parked call).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
