package shadow_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (the concurrent callers, a watch).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
