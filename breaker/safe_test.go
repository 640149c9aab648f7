package breaker

import "testing"

func TestRetrySafe(t *testing.T) {
	yes, no := new(bool), new(bool)
	*yes = true
	tests := []struct {
		name                    string
		explicit, safe, trusted bool
		readOnly, idempotent    *bool
		want                    bool
	}{
		{"operator says safe", true, true, false, nil, nil, true},
		{"operator says safe, annotations disagree", true, true, true, no, no, true},
		{"operator says unsafe, trusted read-only", true, false, true, yes, yes, false},
		{"operator says unsafe, untrusted", true, false, false, nil, nil, false},
		{"trusted read-only", false, false, true, yes, nil, true},
		{"trusted idempotent", false, false, true, nil, yes, true},
		{"trusted both", false, false, true, yes, yes, true},
		{"trusted, hints false", false, false, true, no, no, false},
		{"trusted, no hints", false, false, true, nil, nil, false},
		{"untrusted read-only", false, false, false, yes, nil, false},
		{"untrusted idempotent", false, false, false, nil, yes, false},
		{"untrusted both", false, false, false, yes, yes, false},
		{"nothing said", false, false, false, nil, nil, false},
		{"safe without explicit is ignored", false, true, false, nil, nil, false},
	}
	for _, tt := range tests {
		if got := RetrySafe(tt.explicit, tt.safe, tt.trusted, tt.readOnly, tt.idempotent); got != tt.want {
			t.Errorf("%s: RetrySafe = %v, want %v", tt.name, got, tt.want)
		}
	}
}
