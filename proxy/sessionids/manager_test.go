package sessionids

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/server"
)

// clock is a settable time for the manager.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fakeShared is a shared store in memory: what it was asked and told.
type fakeShared struct {
	mu         sync.Mutex
	heard      func(string)
	missed     func()
	stopped    bool
	announced  []string
	ttls       []time.Duration
	terminated map[string]bool
	err        error
	asked      map[string]int
	release    chan struct{} // when set, Lookup waits for it
	owners     map[string]string
	claims     []string // "id principal ttl", in order
	ownerAsks  int
}

func newFakeShared() *fakeShared {
	return &fakeShared{terminated: map[string]bool{}, asked: map[string]int{}, owners: map[string]string{}}
}

func (f *fakeShared) Claim(id, principal string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.owners[id] = principal
	f.claims = append(f.claims, id+" "+principal+" "+ttl.String())
}

func (f *fakeShared) Owner(_ context.Context, id string) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ownerAsks++
	if f.err != nil {
		return "", false, f.err
	}
	p, ok := f.owners[id]
	return p, ok, nil
}

func (f *fakeShared) Follow(heard func(string), missed func()) func() {
	f.heard, f.missed = heard, missed
	return func() { f.mu.Lock(); f.stopped = true; f.mu.Unlock() }
}

func (f *fakeShared) Announce(id string, ttl time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.announced, f.ttls = append(f.announced, id), append(f.ttls, ttl)
	f.terminated[id] = true
}

func (f *fakeShared) Lookup(_ context.Context, id string) (bool, string, error) {
	f.mu.Lock()
	f.asked[id]++
	release := f.release
	f.mu.Unlock()
	if release != nil {
		<-release
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, "", f.err
	}
	return f.terminated[id], f.owners[id], nil
}

func (f *fakeShared) askedFor(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[id]
}

func validate(t *testing.T, m *Manager, id string) bool {
	t.Helper()
	terminated, err := m.Validate(id)
	if err != nil {
		t.Fatalf("Validate(%q): %v", id, err)
	}
	return terminated
}

func TestTerminatedIDIsRefused(t *testing.T) {
	m := New(Options{IdleTTL: 30 * time.Minute})
	id, other := m.Generate(), m.Generate()
	if validate(t, m, id) {
		t.Fatal("a live session was refused")
	}
	if notAllowed, err := m.Terminate(id); notAllowed || err != nil {
		t.Fatalf("Terminate = %v, %v; want false, nil (mcp-go then cleans up)", notAllowed, err)
	}
	if !validate(t, m, id) {
		t.Fatal("a terminated session is still accepted")
	}
	if validate(t, m, other) {
		t.Fatal("terminating one session refused another")
	}
}

func TestUnknownWellFormedIDIsAccepted(t *testing.T) {
	m := New(Options{IdleTTL: time.Minute})
	// Minted by another replica, which may run mcp-go's own manager.
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if validate(t, m, id) {
		t.Fatal("a well-formed id this replica never saw was refused")
	}
}

func TestGeneratedIDsHaveMCPGosFormat(t *testing.T) {
	m := New(Options{})
	id := m.Generate()
	if !strings.HasPrefix(id, "mcp-session-") || len(id) != len("mcp-session-")+36 {
		t.Fatalf("Generate() = %q, want mcp-session-<uuid>", id)
	}
	if _, err := (&server.StatelessGeneratingSessionIdManager{}).Validate(id); err != nil {
		t.Fatalf("mcp-go's manager refuses our id %q: %v", id, err)
	}
	if m.Generate() == id {
		t.Fatal("two ids alike")
	}
}

func TestMalformedIDIsAnError(t *testing.T) {
	m := New(Options{})
	for _, id := range []string{"", "mcp-session-", "mcp-session-not-a-uuid", "session-0f8fad5b-d9cb-469f-a165-70867728950e",
		"MCP-SESSION-0f8fad5b-d9cb-469f-a165-70867728950e", "mcp-session-0f8fad5b-d9cb-469f-a165-70867728950"} {
		if _, err := m.Validate(id); !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%q) err = %v, want ErrInvalid", id, err)
		}
		if _, err := (&server.StatelessGeneratingSessionIdManager{}).Validate(id); err == nil {
			t.Errorf("mcp-go accepts %q, which we refuse", id)
		}
		if notAllowed, err := m.Terminate(id); notAllowed || err != nil {
			t.Errorf("Terminate(%q) = %v, %v; want false, nil", id, notAllowed, err)
		}
	}
}

func TestTerminateIsIdempotent(t *testing.T) {
	f := newFakeShared()
	m := New(Options{IdleTTL: time.Hour, Shared: f})
	id := m.Generate()
	never := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	for _, ended := range []string{id, id, never} {
		if notAllowed, err := m.Terminate(ended); notAllowed || err != nil {
			t.Fatalf("Terminate(%q) = %v, %v", ended, notAllowed, err)
		}
	}
	if !validate(t, m, id) || !validate(t, m, never) {
		t.Fatal("an ended session is accepted")
	}
	if len(f.announced) != 2 || f.announced[0] != id || f.announced[1] != never || f.ttls[0] != time.Hour {
		t.Fatalf("announced %v for %v, want each end once, for the idle TTL", f.announced, f.ttls)
	}
}

func TestTerminatedIDsExpireAfterTheIdleTTL(t *testing.T) {
	c := newClock()
	m := New(Options{IdleTTL: 10 * time.Minute, Now: c.now})
	id := m.Generate()
	m.Terminate(id)
	c.advance(10*time.Minute - time.Nanosecond)
	if !validate(t, m, id) {
		t.Fatal("a terminated id was forgotten before the idle TTL")
	}
	c.advance(time.Nanosecond)
	if validate(t, m, id) {
		t.Fatal("a terminated id is refused past the idle TTL")
	}

	short := New(Options{IdleTTL: time.Second, Now: c.now})
	if short.Retention() != MinRetention {
		t.Fatalf("retention %v for a 1s idle TTL, want %v", short.Retention(), MinRetention)
	}
}

func TestTerminatedIDsAreBoundedOldestFirst(t *testing.T) {
	c := newClock()
	m := New(Options{IdleTTL: time.Hour, Now: c.now, MaxIDs: 3})
	var ids []string
	for range 4 {
		id := m.Generate()
		ids = append(ids, id)
		m.Terminate(id)
		c.advance(time.Second)
	}
	if validate(t, m, ids[0]) {
		t.Fatal("the oldest termination is kept past the bound")
	}
	for _, id := range ids[1:] {
		if !validate(t, m, id) {
			t.Fatalf("%s forgotten; only the oldest should be", id)
		}
	}
	if n := m.terminated.len(); n != 3 {
		t.Fatalf("%d terminations kept, want 3", n)
	}
}

// mcp-go's sweeper (idle sessions) and Shutdown resolve the manager with no
// request: their Terminate must not end the session for the other replicas.
func TestHousekeepingDoesNotTerminate(t *testing.T) {
	f := newFakeShared()
	m := New(Options{Shared: f})
	id := m.Generate()
	if notAllowed, err := m.Resolver().ResolveSessionIdManager(nil).Terminate(id); notAllowed || err != nil {
		t.Fatalf("housekeeping Terminate = %v, %v", notAllowed, err)
	}
	if validate(t, m, id) || len(f.announced) != 0 {
		t.Fatalf("an idle sweep ended the session (announced %v)", f.announced)
	}
	req := httptest.NewRequest(http.MethodDelete, "/mcp", nil)
	if got, ok := m.Resolver().ResolveSessionIdManager(req).(request); !ok || got.Manager != m {
		t.Fatalf("a request resolves to %T, want the manager's view of it", got)
	}
}

type principalKey struct{}

func as(principal string) context.Context {
	return context.WithValue(context.Background(), principalKey{}, principal)
}

func principalOf(ctx context.Context) string { p, _ := ctx.Value(principalKey{}).(string); return p }

// ownedManager is a manager over f (nil: none) whose requests carry a
// principal, and mint mints a session for one, as mcp-go does on
// initialize.
func ownedManager(f *fakeShared, now func() time.Time) *Manager {
	o := Options{IdleTTL: 10 * time.Minute, Principal: principalOf, Now: now}
	if f != nil {
		o.Shared = f
	}
	return New(o)
}

func mintFor(m *Manager, principal string) string {
	req := httptest.NewRequestWithContext(as(principal), http.MethodPost, "/mcp", nil)
	return m.Resolver().ResolveSessionIdManager(req).Generate()
}

// deleteAs is a DELETE of id by principal as proxy's bindSession and
// mcp-go run it: MayEnd, and unless it says NotOwner, Terminate through the
// Resolver.
func deleteAs(m *Manager, principal, id string) Ending {
	ctx, e := m.MayEnd(as(principal), id)
	if e != NotOwner {
		req := httptest.NewRequestWithContext(ctx, http.MethodDelete, "/mcp", nil)
		m.Resolver().ResolveSessionIdManager(req).Terminate(id)
	}
	return e
}

// A session ends for every replica only by its owner's DELETE: the owner
// is recorded when the id is minted, here and in the store, and another
// principal's DELETE ends nothing and announces nothing.
func TestOnlyTheOwnerEndsASession(t *testing.T) {
	f := newFakeShared()
	m := ownedManager(f, nil)
	id := mintFor(m, "alice")
	if len(f.claims) != 1 || f.claims[0] != id+" alice 15m0s" {
		t.Fatalf("claims %v, want the owner recorded for 1.5 idle TTLs", f.claims)
	}
	if e := deleteAs(m, "bob", id); e != NotOwner || len(f.announced) != 0 || validate(t, m, id) {
		t.Fatalf("bob's DELETE: %v, announced %v, refused %v", e, f.announced, m.Terminated(id))
	}
	if f.ownerAsks != 0 {
		t.Fatal("the store was asked who owns a session minted here")
	}
	if e := deleteAs(m, "alice", id); e != EndEverywhere || len(f.announced) != 1 || !validate(t, m, id) {
		t.Fatalf("alice's DELETE: %v, announced %v", e, f.announced)
	}
}

// A replica that did not mint the session asks the store who did. An id
// no replica minted, or one whose owner cannot be looked up (store down),
// is ended on this replica only: not refused, not written, not announced.
func TestDeleteOfSessionMintedElsewhere(t *testing.T) {
	f := newFakeShared()
	m := ownedManager(f, nil)
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	f.owners[id] = "alice"
	if e := deleteAs(m, "bob", id); e != NotOwner || len(f.announced) != 0 || validate(t, m, id) {
		t.Fatalf("bob's DELETE: %v, announced %v", e, f.announced)
	}
	random := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if e := deleteAs(m, "bob", random); e != EndLocally || len(f.announced) != 0 || validate(t, m, random) {
		t.Fatalf("DELETE of an id nobody minted: %v, announced %v, refused %v", e, f.announced, m.Terminated(random))
	}
	f.err = errors.New("store down")
	if e := deleteAs(m, "alice", id); e != EndLocally || len(f.announced) != 0 || m.Terminated(id) {
		t.Fatalf("DELETE with the store down: %v, announced %v, refused %v", e, f.announced, m.Terminated(id))
	}
	f.err = nil
	if e := deleteAs(m, "alice", id); e != EndEverywhere || len(f.announced) != 1 || !m.Terminated(id) {
		t.Fatalf("alice's DELETE: %v, announced %v", e, f.announced)
	}
	// Without Options.Principal nobody owns anything: no DELETE is announced.
	plain := New(Options{Shared: f})
	if e := deleteAs(plain, "", plain.Generate()); e != EndLocally || len(f.announced) != 1 {
		t.Fatalf("DELETE without principals: %v, announced %v", e, f.announced)
	}
}

// The owner of a session in use is recorded again once per half idle TTL
// (on a request, in the background), and after a lost subscription; one
// idle for 1.5 idle TTLs is forgotten here as its record is in the store.
func TestOwnerIsRecordedAgainWhileInUse(t *testing.T) {
	f := newFakeShared()
	c := newClock()
	m := ownedManager(f, c.now)
	id := mintFor(m, "alice")
	h := m.Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	get := func() {
		r := httptest.NewRequest(http.MethodGet, "/mcp", nil).WithContext(as("alice"))
		r.Header.Set("Mcp-Session-Id", id)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	c.advance(4 * time.Minute)
	get()
	if len(f.claims) != 1 {
		t.Fatalf("recorded again within half an idle TTL: %v", f.claims)
	}
	c.advance(2 * time.Minute)
	get()
	if len(f.claims) != 2 {
		t.Fatalf("not recorded again after half an idle TTL: %v", f.claims)
	}
	f.missed()
	get()
	if len(f.claims) != 3 {
		t.Fatalf("not recorded again after a lost subscription: %v", f.claims)
	}
	c.advance(15 * time.Minute)
	delete(f.owners, id) // expired there too
	if _, e := m.MayEnd(as("bob"), id); e != EndLocally || f.ownerAsks != 1 {
		t.Fatalf("after 1.5 idle TTLs unused: %v, store asked %d times; want the owner forgotten here", e, f.ownerAsks)
	}
	// Without a store, the owner is kept in memory the same way.
	local := ownedManager(nil, c.now)
	id = mintFor(local, "alice")
	for range 4 {
		c.advance(6 * time.Minute)
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil).WithContext(as("alice"))
		r.Header.Set("Mcp-Session-Id", id)
		local.Guard(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), r)
	}
	if _, e := local.MayEnd(as("bob"), id); e != NotOwner {
		t.Fatalf("a session in use for 24m without a store: %v, want its owner known", e)
	}
}

func TestUnknownIDIsLookedUpOnce(t *testing.T) {
	f := newFakeShared()
	m := New(Options{Shared: f})
	live := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	ended := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	f.terminated[ended] = true
	for range 3 {
		if validate(t, m, live) {
			t.Fatal("a live session another replica opened was refused")
		}
		if !validate(t, m, ended) {
			t.Fatal("a session another replica ended is accepted")
		}
	}
	if f.askedFor(live) != 1 || f.askedFor(ended) != 1 {
		t.Fatalf("asked the store %d and %d times, want once each", f.askedFor(live), f.askedFor(ended))
	}
	if mine := m.Generate(); validate(t, m, mine) || f.askedFor(mine) != 0 {
		t.Fatal("an id minted here was looked up")
	}
}

func TestConcurrentLookupsOfOneIDAskOnce(t *testing.T) {
	f := newFakeShared()
	f.release = make(chan struct{})
	m := New(Options{Shared: f})
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if terminated, err := m.Validate(id); terminated || err != nil {
				t.Errorf("Validate = %v, %v", terminated, err)
			}
		}()
	}
	close(f.release)
	wg.Wait()
	if n := f.askedFor(id); n != 1 {
		t.Fatalf("asked the store %d times, want once", n)
	}
}

func TestHeardTerminationIsRefused(t *testing.T) {
	f := newFakeShared()
	m := New(Options{Shared: f})
	id := m.Generate()
	f.heard(id)
	if !validate(t, m, id) {
		t.Fatal("a termination another replica announced is accepted")
	}
	f.heard("not an id") // ignored
	m.Close()
	if !f.stopped {
		t.Fatal("Close did not stop following")
	}
}

// A replica whose subscription was lost may have missed an announcement:
// after it is back, every id it knew is looked up once more.
func TestMissedAnnouncementsAreLookedUpAgain(t *testing.T) {
	f := newFakeShared()
	m := New(Options{Shared: f})
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	if validate(t, m, id) {
		t.Fatal("refused before anyone ended it")
	}
	f.mu.Lock()
	f.terminated[id] = true // ended on another replica; the message never came
	f.mu.Unlock()
	if validate(t, m, id) || f.askedFor(id) != 1 {
		t.Fatal("a known id was looked up again before anything was missed")
	}
	f.missed()
	if !validate(t, m, id) || f.askedFor(id) != 2 {
		t.Fatalf("after a lost subscription the id is accepted (asked %d times)", f.askedFor(id))
	}
}

// A store that cannot answer never refuses: the id is accepted, and asked
// about again next time.
func TestStoreFailureAcceptsAndAsksAgain(t *testing.T) {
	f := newFakeShared()
	f.err = errors.New("store down")
	m := New(Options{Shared: f})
	id := (&server.StatelessGeneratingSessionIdManager{}).Generate()
	f.terminated[id] = true
	for range 2 {
		if validate(t, m, id) {
			t.Fatal("refused because the store failed")
		}
	}
	if f.askedFor(id) != 2 {
		t.Fatalf("asked %d times, want each time while the store fails", f.askedFor(id))
	}
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	if !validate(t, m, id) {
		t.Fatal("once the store answers, the ended session is still accepted")
	}
}

func TestGuardRefusesTerminatedSessions(t *testing.T) {
	m := New(Options{})
	live, ended := m.Generate(), m.Generate()
	m.Terminate(ended)
	var reached []string
	h := m.Guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := new(strings.Builder)
		if r.Body != nil {
			buf := make([]byte, 512)
			for {
				n, err := r.Body.Read(buf)
				body.Write(buf[:n])
				if err != nil {
					break
				}
			}
		}
		reached = append(reached, r.Method+" "+body.String())
	}))
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}`
	cases := []struct {
		name, method, id, version, body string
		refused                         bool
	}{
		{"POST of an ended session", http.MethodPost, ended, "2025-11-25", call, true},
		{"GET of an ended session", http.MethodGet, ended, "2025-11-25", "", true},
		{"POST of a live session", http.MethodPost, live, "2025-11-25", call, false},
		{"GET of a live session", http.MethodGet, live, "2025-11-25", "", false},
		{"initialize naming an ended session", http.MethodPost, ended, "", initialize, false},
		{"DELETE of an ended session", http.MethodDelete, ended, "2025-11-25", "", false},
		{"2026-07-28 request", http.MethodPost, ended, "2026-07-28", call, false},
		{"malformed id (mcp-go answers it)", http.MethodPost, "nope", "2025-11-25", call, false},
		{"no id", http.MethodPost, "", "2025-11-25", initialize, false},
	}
	for _, tc := range cases {
		reached = nil
		r := httptest.NewRequest(tc.method, "/mcp", strings.NewReader(tc.body))
		if tc.id != "" {
			r.Header.Set("Mcp-Session-Id", tc.id)
		}
		if tc.version != "" {
			r.Header.Set("Mcp-Protocol-Version", tc.version)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		switch {
		case tc.refused && (w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != "Session terminated" || reached != nil):
			t.Errorf("%s: %d %q, reached %v; want 404 Session terminated", tc.name, w.Code, w.Body.String(), reached)
		case !tc.refused && (len(reached) != 1 || reached[0] != tc.method+" "+tc.body):
			t.Errorf("%s: the handler saw %q, want %q (answer %d)", tc.name, reached, tc.method+" "+tc.body, w.Code)
		}
	}
}

// A GET or POST naming a session is refused (404, as an unknown session)
// when another principal opened it, on the replica that minted it and on
// any other: the owner comes with the one lookup a replica makes of an id
// it has not seen. Before, a replica that did not mint the id let bob's GET
// through, and mcp-go registered alice's session there for bob. An owner
// nobody recorded (the store down) refuses no one.
func TestOnlyTheOwnerUsesASessionOnAnyReplica(t *testing.T) {
	f := newFakeShared()
	a, b := ownedManager(f, nil), ownedManager(f, nil)
	id := mintFor(a, "alice")
	serve := func(m *Manager, method, principal, id string) int {
		r := httptest.NewRequest(method, "/mcp", nil).WithContext(as(principal))
		r.Header.Set("Mcp-Session-Id", id)
		w := httptest.NewRecorder()
		m.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })).ServeHTTP(w, r)
		return w.Code
	}
	for _, m := range []*Manager{b, a} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			if code := serve(m, method, "bob", id); code != http.StatusNotFound {
				t.Fatalf("bob's %s of alice's session: %d, want 404", method, code)
			}
			if code := serve(m, method, "alice", id); code != http.StatusOK {
				t.Fatalf("alice's %s of her session: %d", method, code)
			}
		}
	}
	if n := f.askedFor(id); n != 1 {
		t.Fatalf("replica B asked the store %d times, want once (owner and termination together)", n)
	}
	f.err = errors.New("store down")
	unseen := mintFor(a, "alice")
	if code := serve(b, http.MethodGet, "bob", unseen); code != http.StatusOK {
		t.Fatalf("the store down, bob's GET of a session B never saw: %d, want it let through (no owner known)", code)
	}
}
