package authn

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// authAs authenticates one request bearing key and returns the principal, or "" when refused.
func authAs(t *testing.T, a *Authenticator, key string) string {
	t.Helper()
	sub, err := a.Authenticate(request("", "Bearer "+key))
	var f *Failure
	switch {
	case err == nil:
		return sub.Principal
	case errors.As(err, &f) && f.Status == 401:
		return ""
	default:
		t.Fatalf("authenticate %q: %v", key, err)
		return ""
	}
}

// A key added by ReplaceAPIKeys works from the next request on, a removed one stops working at once,
// and the change names principals and counts only.
func TestReplaceAPIKeys(t *testing.T) {
	const carolKey, daveKey = "tg_carol_key", "tg_dave_key"
	a, err := New(context.Background(), Options{APIKeys: []APIKey{
		{Principal: "alice", SHA256: HashKey(aliceKey)},
		{Principal: "carol", SHA256: HashKey(carolKey), Attributes: map[string]string{"team": "a"}},
	}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if got := authAs(t, a, daveKey); got != "" {
		t.Fatalf("dave's key accepted before it was added: %q", got)
	}
	attrs := map[string]string{"team": "b"}
	change := a.ReplaceAPIKeys([]APIKey{
		{Principal: "dave", SHA256: HashKey(daveKey)},
		{Principal: "carol", SHA256: HashKey(carolKey), Attributes: attrs},
	})
	attrs["team"] = "changed by the caller afterwards"
	want := KeyChange{Before: 2, After: 2, Added: []string{"dave"}, Removed: []string{"alice"}, Changed: []string{"carol"}}
	if !equalChange(change, want) {
		t.Fatalf("change = %+v, want %+v", change, want)
	}
	if got := authAs(t, a, daveKey); got != "dave" {
		t.Errorf("added key: principal %q, want dave", got)
	}
	if got := authAs(t, a, aliceKey); got != "" {
		t.Errorf("removed key still accepted, as %q", got)
	}
	sub, err := a.Authenticate(request("", "Bearer "+carolKey))
	if err != nil || sub.Attrs["team"] != "b" {
		t.Errorf("kept key: %+v, %v; want the new attributes, copied", sub, err)
	}
	if c := a.ReplaceAPIKeys([]APIKey{{Principal: "dave", SHA256: HashKey(daveKey)}, {Principal: "carol", SHA256: HashKey(carolKey), Attributes: map[string]string{"team": "b"}}}); !c.Unchanged() {
		t.Errorf("same keys again: %+v, want unchanged", c)
	}
	// The same key now authenticates as another principal: the old one is removed, the new one added.
	c := a.ReplaceAPIKeys([]APIKey{{Principal: "erin", SHA256: HashKey(daveKey)}})
	if want := (KeyChange{Before: 2, After: 1, Added: []string{"erin"}, Removed: []string{"carol", "dave"}}); !equalChange(c, want) {
		t.Errorf("change = %+v, want %+v", c, want)
	}
}

func equalChange(a, b KeyChange) bool {
	return a.Before == b.Before && a.After == b.After && slices.Equal(a.Added, b.Added) &&
		slices.Equal(a.Removed, b.Removed) && slices.Equal(a.Changed, b.Changed)
}

// Requests authenticated while the keys are swapped over and over (run with -race): a key in every
// set always works, a key in every other set works or not but never as anyone else, and once the
// last swap has returned, the next request sees its result.
func TestReplaceAPIKeysConcurrent(t *testing.T) {
	const toggledKey = "tg_toggled_key"
	stable := APIKey{Principal: "alice", SHA256: HashKey(aliceKey)}
	toggled := APIKey{Principal: "bob", SHA256: HashKey(toggledKey)}
	a, err := New(context.Background(), Options{APIKeys: []APIKey{stable}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	var stop atomic.Bool
	var failures atomic.Int32
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				if sub, err := a.Authenticate(request("", "Bearer "+aliceKey)); err != nil || sub.Principal != "alice" {
					failures.Add(1)
				}
				if sub, err := a.Authenticate(request("", "Bearer "+toggledKey)); err == nil && sub.Principal != "bob" {
					failures.Add(1)
				}
			}
		})
	}
	for i := range 2000 {
		set := []APIKey{stable}
		if i%2 == 0 {
			set = append(set, toggled)
		}
		a.ReplaceAPIKeys(set)
	}
	a.ReplaceAPIKeys([]APIKey{stable}) // bob revoked
	if got := authAs(t, a, toggledKey); got != "" {
		t.Errorf("revoked key accepted after the swap returned, as %q", got)
	}
	stop.Store(true)
	wg.Wait()
	if n := failures.Load(); n != 0 {
		t.Fatalf("%d requests saw a broken key set during the swaps", n)
	}
}
