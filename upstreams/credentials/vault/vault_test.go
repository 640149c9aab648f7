package vault

import (
	"context"
	"errors"
	"testing"
)

func TestMemoryKeepsCopiesAndListsInOrder(t *testing.T) {
	ctx := context.Background()
	var s Memory
	data := []byte("s3cret")
	for _, k := range []Key{{"bob", "orders", Secret}, {"alice", "orders", OAuth}, {"alice", "crm", OAuth}} {
		if err := s.Put(ctx, Entry{Key: k, Source: "user"}, data); err != nil {
			t.Fatal(err)
		}
	}
	data[0] = 'X'
	got, e, err := s.Get(ctx, Key{"bob", "orders", Secret})
	if err != nil || string(got) != "s3cret" || e.Source != "user" {
		t.Fatalf("Get = %q, %+v, %v; want the stored copy", got, e, err)
	}
	list, _ := s.List(ctx, Filter{Upstream: "orders"})
	if len(list) != 2 || list[0].Principal != "alice" || list[1].Principal != "bob" {
		t.Fatalf("List(orders) = %+v, want alice then bob", list)
	}
	if err := s.Delete(ctx, Key{"bob", "orders", Secret}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, Key{"bob", "orders", Secret}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Delete: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, Key{"bob", "orders", Secret}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second Delete: %v, want ErrNotFound", err)
	}
}
