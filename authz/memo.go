package authz

import (
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/casbin/casbin/v2/util"
)

// A Policy is immutable, so its answers to the same question never change:
// they are remembered, per Policy (a reload starts afresh). Casbin's
// enforce costs microseconds and several allocations per call (it gathers
// its function map and evaluates the matcher for every line); a call would
// otherwise pay it twice (Visible in authorize, Decide in conditions).
//
// Only answers that cannot depend on the call's arguments are remembered:
// every Visible answer (it ignores arguments by definition), and Decide
// answers for an object and action no conditional line can match. The key
// is the whole subject (principal, credential roles, attributes) plus
// object and action. The memo holds at most maxMemo answers; past that,
// questions are simply asked again (no eviction to get wrong).
type memo struct {
	answers sync.Map // key -> bool (visible) or Decision
	size    atomic.Int64
	condMay sync.Map // obj+"\x00"+act -> bool: some conditional p line may apply
	scopes  sync.Map // obj+"\x00"+act -> *neededScopes: what the s lines name (scopes.go)
}

// maxMemo bounds the answers one Policy remembers.
const maxMemo = 1 << 16

func (m *memo) load(key string) (any, bool) { return m.answers.Load(key) }

func (m *memo) store(key string, v any) {
	if m.size.Load() >= maxMemo {
		return
	}
	if _, loaded := m.answers.LoadOrStore(key, v); !loaded {
		m.size.Add(1)
	}
}

// memoKey identifies a question: kind ("v" visible, "d" decide), the
// subject in full, the object and the action.
func memoKey(kind string, s Subject, obj, act string) string {
	var b strings.Builder
	b.WriteString(kind)
	b.WriteByte(0)
	b.WriteString(s.Principal)
	b.WriteByte(0)
	roles := s.Roles
	if len(roles) > 1 && !slices.IsSorted(roles) {
		roles = slices.Sorted(slices.Values(roles))
	}
	for _, r := range roles {
		b.WriteString(r)
		b.WriteByte(1)
	}
	b.WriteByte(0)
	if len(s.Attrs) > 0 {
		keys := make([]string, 0, len(s.Attrs))
		for k := range s.Attrs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(k)
			b.WriteByte(2)
			b.WriteString(s.Attrs[k])
			b.WriteByte(1)
		}
	}
	b.WriteByte(0)
	b.WriteString(obj)
	b.WriteByte(0)
	b.WriteString(act)
	return b.String()
}

// conditionMayApply reports whether a p line with a condition could match
// obj and act: only then can Decide's answer depend on the arguments.
func (p *Policy) conditionMayApply(obj, act string) bool {
	key := obj + "\x00" + act
	if v, ok := p.memo.condMay.Load(key); ok {
		return v.(bool)
	}
	may := false
	objIdx, actIdx := p.info.pIndex["obj"], p.info.pIndex["act"]
	for _, r := range p.prules {
		if r.cond == nil || r.fields[actIdx] != act {
			continue
		}
		if p.objectMatches(obj, r.fields[objIdx], objIdx) {
			may = true
			break
		}
	}
	p.memo.condMay.Store(key, may)
	return may
}

// objectMatches is the matcher's object test: keyMatch, or regexMatch when
// the model uses it. A pattern that does not compile counts as matching
// (the answer is then never remembered).
func (p *Policy) objectMatches(obj, pattern string, idx int) bool {
	if p.info.regex[idx] {
		re, err := regexp.Compile(pattern)
		return err != nil || re.MatchString(obj)
	}
	return util.KeyMatch(obj, pattern)
}
