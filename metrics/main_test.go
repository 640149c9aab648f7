package metrics

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind (an httptest server or a scrape
// that never finished).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
