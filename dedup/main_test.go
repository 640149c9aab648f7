package dedup

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a joiner
// or an executing call that never finished).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
