package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/redistest"
)

// A catch-up that could not read every server fails, so it is tried again:
// go-redis reports only a pipeline's first error, and a missing key there
// (the usual case) hid a later server's failure.
func TestBreakerCatchUpFailsWhenAServerCannotBeRead(t *testing.T) {
	srv := redistest.Start(t)
	c, _ := redistest.Open(t, srv, "catchup:")
	s := New(c, "r1", []string{"missing", "broken"}, func(string, time.Time) {})
	// A hash where an opening (a string) belongs: GET fails with WRONGTYPE.
	if err := c.Redis().HSet(context.Background(), s.openKey("broken"), "x", "1").Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.readOpenings(context.Background()); err == nil {
		t.Fatal("the catch-up succeeded without reading every server")
	}
	if err := c.Redis().Del(context.Background(), s.openKey("broken")).Err(); err != nil {
		t.Fatal(err)
	}
	if err := s.readOpenings(context.Background()); err != nil {
		t.Fatalf("with every key readable: %v", err)
	}
}
