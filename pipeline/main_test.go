package pipeline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (a call still running, a retry timer).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
