package replay

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/audit"
)

// The directions of a shadow disagreement, as toolgate_policy_shadow_disagreements_total names them.
const (
	ShadowAllows = "shadow_allows" // the shadow policy would allow a call the live policy denied
	ShadowDenies = "shadow_denies" // the shadow policy would deny a call the live policy allowed
)

// ShadowOptions bound the records [Shadow] reads by their time, [Since, Until); zero means open.
type ShadowOptions struct {
	Since, Until time.Time
}

// Disagreement is a group of calls the shadow policy (authz.shadow_policy) decided otherwise than
// the live policy, as their audit records say: one principal, one tool, one direction, one pair of
// outcomes.
type Disagreement struct {
	Principal string  `json:"principal"`
	Tool      string  `json:"tool"`
	Direction string  `json:"direction"` // shadow_allows or shadow_denies
	Live      Outcome `json:"live"`      // what the live policy decided (allow or deny)
	Shadow    Outcome `json:"shadow"`    // what the shadow policy would have
	// ShadowVersions are the versions of the shadow policy that disagreed, in the order first seen:
	// a shadow file edited while the gateway ran gives several.
	ShadowVersions []string  `json:"shadow_versions"`
	Calls          int       `json:"calls"`
	First          time.Time `json:"first"`
	Last           time.Time `json:"last"`
	Example        string    `json:"example"` // file:line of the first such record
}

// ShadowReport is what the trail records of the shadow policy's disagreements.
type ShadowReport struct {
	Files         int `json:"files"`
	Records       int `json:"records"`        // lines read, every kind
	Calls         int `json:"calls"`          // call records inside the window
	OutsideWindow int `json:"outside_window"` // call records before Since or from Until on
	Disagreed     int `json:"disagreed"`      // calls whose record carries a shadow disagreement
	ShadowAllows  int `json:"shadow_allows"`
	ShadowDenies  int `json:"shadow_denies"`
	// Disagreements are the groups, sorted by principal, tool and count.
	Disagreements []Disagreement `json:"disagreements"`
}

// Empty reports whether no call in the window records a disagreement.
func (r *ShadowReport) Empty() bool { return r.Disagreed == 0 }

// Summary is the report's one-line count.
func (r *ShadowReport) Summary() string {
	return fmt.Sprintf("%d call(s) read from %d record(s) in %d file(s): %d disagreement(s) recorded (%d %s, %d %s)",
		r.Calls, r.Records, r.Files, r.Disagreed, r.ShadowAllows, ShadowAllows, r.ShadowDenies, ShadowDenies)
}

// Shadow reads the given trails (each a list of files, oldest first, as [audit.TrailFiles] gives
// them) and reports the disagreements the shadow policy recorded on call records: the shadow field
// the gateway writes only where the shadow policy decided a call otherwise than the live one. Nothing
// is decided again: the report is what the running gateway saw, with the policies it ran then.
func Shadow(o ShadowOptions, trails [][]string) (*ShadowReport, error) {
	var rep ShadowReport
	type key struct {
		principal, tool string
		live, shadow    Outcome
	}
	groups := map[key]*Disagreement{}
	for _, files := range trails {
		rep.Files += len(files)
		err := audit.ReadFiles(files, func(rec *audit.Record, at audit.Position) error {
			rep.Records++
			if rec.Kind != audit.KindCall {
				return nil
			}
			if (!o.Since.IsZero() && rec.Time.Before(o.Since)) || (!o.Until.IsZero() && !rec.Time.Before(o.Until)) {
				rep.OutsideWindow++
				return nil
			}
			rep.Calls++
			s := rec.Shadow
			if s == nil {
				return nil
			}
			rep.Disagreed++
			k := key{principal: rec.Principal, tool: rec.Tool,
				live:   Outcome{Decision: shadowDecision(s.LiveDecision), Rule: s.LiveRule},
				shadow: Outcome{Decision: shadowDecision(s.Decision), Rule: s.Rule}}
			g := groups[k]
			if g == nil {
				g = &Disagreement{Principal: rec.Principal, Tool: rec.Tool, Direction: direction(k.shadow.Decision),
					Live: k.live, Shadow: k.shadow, First: rec.Time, Last: rec.Time, Example: at.String()}
				groups[k] = g
			}
			switch g.Direction {
			case ShadowAllows:
				rep.ShadowAllows++
			case ShadowDenies:
				rep.ShadowDenies++
			}
			g.Calls++
			if rec.Time.After(g.Last) {
				g.Last = rec.Time
			}
			if rec.Time.Before(g.First) {
				g.First = rec.Time
			}
			if s.Version != "" && !slices.Contains(g.ShadowVersions, s.Version) {
				g.ShadowVersions = append(g.ShadowVersions, s.Version)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	rep.Disagreements = make([]Disagreement, 0, len(groups))
	for _, g := range groups {
		if g.ShadowVersions == nil {
			g.ShadowVersions = []string{}
		}
		rep.Disagreements = append(rep.Disagreements, *g)
	}
	slices.SortFunc(rep.Disagreements, func(a, b Disagreement) int {
		return cmp.Or(cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Tool, b.Tool), cmp.Compare(b.Calls, a.Calls),
			cmp.Compare(a.Live.String(), b.Live.String()), cmp.Compare(a.Shadow.String(), b.Shadow.String()))
	})
	return &rep, nil
}

// shadowDecision is a recorded decision in the replay's terms: allowed is allow, denied deny; anything
// else (a trail from a later version) is kept as written.
func shadowDecision(d audit.Decision) string {
	switch d {
	case audit.DecisionAllowed:
		return Allow
	case audit.DecisionDenied:
		return Deny
	}
	return string(d)
}

// direction is the disagreement's direction from the shadow's decision.
func direction(shadow string) string {
	if shadow == Allow {
		return ShadowAllows
	}
	return ShadowDenies
}
