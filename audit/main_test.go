package audit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (the
// interval flusher must stop in Close).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
