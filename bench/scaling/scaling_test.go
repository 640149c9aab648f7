package scaling

import (
	"slices"
	"strings"
	"testing"
)

// -figures picks figures by name, in the report's order whatever order it
// names them in; none named is all of them; a name that is no figure is
// refused with the list, before anything starts.
func TestFiguresAreChosenByName(t *testing.T) {
	names := func(e Env) []string {
		var out []string
		for _, f := range e.chosen() {
			out = append(out, f.name)
		}
		return out
	}
	if got := names(Env{}); !slices.Equal(got, Figures()) || len(got) != 4 {
		t.Errorf("no names chose %v, want every figure %v", got, Figures())
	}
	if got := names(Env{Figures: []string{"big-results", "policy"}}); !slices.Equal(got, []string{"policy", "big-results"}) {
		t.Errorf("big-results,policy chose %v", got)
	}
	if err := CheckFigures([]string{"catalog", "sessions"}); err != nil {
		t.Errorf("known figures refused: %v", err)
	}
	err := CheckFigures([]string{"policy", "big-result"})
	if err == nil || !strings.Contains(err.Error(), `"big-result"`) || !strings.Contains(err.Error(), "big-results") {
		t.Errorf("a misspelt figure: %v, want it refused with the list", err)
	}
}
