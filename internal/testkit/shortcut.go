package testkit

import "testing"

// Seed is one input of a shortcut decoder's table, and whether the
// shortcut takes it. An alias of a plain struct, so that tables may list
// seeds as {input, taken}.
type Seed = struct {
	In    string
	Taken bool
}

// Shortcut is a decoder for the usual shapes only: it reports whether it
// took the input. Check holds what it took to the decoder it stands in for
// (encoding/json): an input it took must decode the same there.
type Shortcut[T any] struct {
	Decode func([]byte) (T, bool)
	Check  func(t *testing.T, in []byte, got T)
}

// Table runs the seeds: each is taken or not as the table says, and what
// is taken passes Check.
func (s Shortcut[T]) Table(t *testing.T, seeds []Seed) {
	t.Helper()
	for _, seed := range seeds {
		got, taken := s.Decode([]byte(seed.In))
		if taken != seed.Taken {
			t.Errorf("took %q: %v, want %v", seed.In, taken, seed.Taken)
		}
		if taken {
			s.Check(t, []byte(seed.In), got)
		}
	}
}

// Fuzz is the fuzz target: seeded with the table, every input the
// shortcut takes must pass Check.
func (s Shortcut[T]) Fuzz(f *testing.F, seeds []Seed) {
	for _, seed := range seeds {
		f.Add([]byte(seed.In))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, taken := s.Decode(in); taken {
			s.Check(t, in, got)
		}
	})
}
