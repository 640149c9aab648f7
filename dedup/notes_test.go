package dedup

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/toolgate/toolgate/envelope"
	"github.com/toolgate/toolgate/pipeline"
	"github.com/toolgate/toolgate/pipeline/pipelinetest"
	"github.com/toolgate/toolgate/upstreams"
)

// notingUpstream is an upstream that sends the caller's client progress
// (through the call's progress func) and log messages (through the call's
// relay, as an upstream connection does) before it answers.
type notingUpstream struct {
	Calls atomic.Int32
	Fn    func(ctx context.Context, n int32, progress func(upstreams.Progress)) (json.RawMessage, error)
}

func (u *notingUpstream) CallToolProgress(ctx context.Context, _, _ string, _ json.RawMessage, progress func(upstreams.Progress)) (json.RawMessage, error) {
	return u.Fn(ctx, u.Calls.Add(1), progress)
}

// sendNotes sends progress 1..3 of 3 and two log lines, interleaved.
func sendNotes(ctx context.Context, progress func(upstreams.Progress)) {
	total := 3.0
	relay := upstreams.RelayFrom(ctx)
	for i := 1; i <= 3; i++ {
		if progress != nil {
			progress(upstreams.Progress{Progress: float64(i), Total: &total, Message: fmt.Sprintf("step %d", i)})
		}
		if i < 3 {
			relay.Log(json.RawMessage(fmt.Sprintf(`{"level":"info","data":"line %d"}`, i)))
		}
	}
}

// notedClient is one client call: what its client is sent, in order, up to
// its answer. Its relay notes each log message on the call, as the
// proxy's does (pipeline.NoteLog).
type notedClient struct {
	ctx    context.Context
	mu     sync.Mutex
	events []string
}

func newNotedClient() *notedClient {
	c := &notedClient{}
	c.ctx = pipeline.WithInteraction(context.Background())
	c.ctx = upstreams.WithRelay(c.ctx, &sinkRelay{c: c})
	return c
}

func (c *notedClient) add(e string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
}

func (c *notedClient) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.events)
}

// call makes the call, with a progress token when withProgress, and notes
// its answer among the notifications.
func (c *notedClient) call(t *testing.T, p *replica, call pipeline.Call, withProgress bool) envelope.Envelope {
	if withProgress {
		call.Progress = func(pr upstreams.Progress) {
			c.add(fmt.Sprintf("progress %g/%g %s", pr.Progress, *pr.Total, pr.Message))
		}
	}
	env := pipelinetest.Envelope(t, p.Handle(c.ctx, call))
	c.add("answer")
	return env
}

type sinkRelay struct{ c *notedClient }

func (r *sinkRelay) Session() string { return "s" }
func (r *sinkRelay) Request(context.Context, string, json.RawMessage) (json.RawMessage, error) {
	return nil, &upstreams.RelayError{Message: "no"}
}
func (r *sinkRelay) Log(params json.RawMessage) {
	pipeline.NoteLog(r.c.ctx, params)
	var m struct{ Data string }
	_ = json.Unmarshal(params, &m)
	r.c.add("log " + m.Data)
}

var notesSent = []string{
	"progress 1/3 step 1", "log line 1", "progress 2/3 step 2", "log line 2", "progress 3/3 step 3", "answer",
}

// A call that joins or replays an identical one gets the notifications that
// call's client was sent, progress under its own progress token (its own
// progress func) and log messages through its own relay, in their order,
// before its answer; on one replica and across replicas. Before, a replay
// carried the result only, and the conformance suite's second run failed
// tools-call-with-progress and tools-call-with-logging (issue 17).
func TestReplayCarriesNotifications(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		up := &notingUpstream{Fn: func(ctx context.Context, n int32, progress func(upstreams.Progress)) (json.RawMessage, error) {
			sendNotes(ctx, progress)
			if n == 1 {
				<-release
			}
			return json.RawMessage(pipelinetest.OKText), nil
		}}
		p := dedupPipeline(t, up)
		first, joined := newNotedClient(), newNotedClient()
		var wg sync.WaitGroup
		var envs [2]envelope.Envelope
		wg.Go(func() { envs[0] = first.call(t, p, getOrder, true) })
		synctest.Wait()
		wg.Go(func() { envs[1] = joined.call(t, p, getOrder, true) })
		synctest.Wait()
		if got := joined.got(); len(got) != 0 {
			t.Fatalf("the joined call was sent %q while the call it joined ran", got)
		}
		close(release)
		wg.Wait()
		if up.Calls.Load() != 1 || !envs[0].OK || !envs[1].OK {
			t.Fatalf("%d executions, %+v", up.Calls.Load(), envs)
		}
		if got := first.got(); !slices.Equal(got, notesSent) {
			t.Fatalf("the call that ran sent its client %q, want %q", got, notesSent)
		}
		if got := joined.got(); !slices.Equal(got, notesSent) {
			t.Fatalf("the joined call sent its client %q, want %q", got, notesSent)
		}
		replay := newNotedClient()
		if env := replay.call(t, p, getOrder, true); !env.Replayed || up.Calls.Load() != 1 {
			t.Fatalf("repeat: replayed=%v, %d executions", env.Replayed, up.Calls.Load())
		}
		if got := replay.got(); !slices.Equal(got, notesSent) {
			t.Fatalf("the replay sent its client %q, want %q", got, notesSent)
		}
		// A caller that asked for no progress gets the log messages only.
		quiet := newNotedClient()
		quiet.call(t, p, getOrder, false)
		if got, want := quiet.got(), []string{"log line 1", "log line 2", "answer"}; !slices.Equal(got, want) {
			t.Fatalf("a replay without a progress token sent %q, want %q", got, want)
		}
		// Across replicas, through the encoded answer.
		shared := newFakeShared()
		ps := replicas(t, 2, up, shared)
		ran, other := newNotedClient(), newNotedClient()
		ran.call(t, ps[0], getOrder, true)
		if env := other.call(t, ps[1], getOrder, true); !env.Replayed || up.Calls.Load() != 2 {
			t.Fatalf("another replica's repeat: replayed=%v, %d executions", env.Replayed, up.Calls.Load())
		}
		if got := other.got(); !slices.Equal(got, notesSent) {
			t.Fatalf("another replica's replay sent its client %q, want %q", got, notesSent)
		}
	})
}

// The caller that ran the call asked for no progress: none was requested
// upstream, so none is recorded, and a replay with a token gets the log
// messages only. Not a progress func of the joiner's either.
func TestReplayProgressOnlyWhatTheCallGot(t *testing.T) {
	up := &notingUpstream{Fn: func(ctx context.Context, _ int32, progress func(upstreams.Progress)) (json.RawMessage, error) {
		if progress != nil {
			t.Error("progress requested upstream for a caller that asked for none")
		}
		sendNotes(ctx, progress)
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	p := dedupPipeline(t, up)
	newNotedClient().call(t, p, getOrder, false)
	c := newNotedClient()
	c.call(t, p, getOrder, true)
	if got, want := c.got(), []string{"log line 1", "log line 2", "answer"}; !slices.Equal(got, want) {
		t.Fatalf("replay sent %q, want %q", got, want)
	}
}

// What is recorded is bounded (pipeline.MaxNoteProgress, MaxNoteLogs,
// MaxNoteLogBytes), on one replica and through the shared store: the last
// progress notifications, the first log messages.
func TestReplayedNotificationsBounded(t *testing.T) {
	const progressSent, logsSent = 100, 100
	up := &notingUpstream{Fn: func(ctx context.Context, _ int32, progress func(upstreams.Progress)) (json.RawMessage, error) {
		total := float64(progressSent)
		for i := 1; i <= max(progressSent, logsSent); i++ {
			if i <= progressSent {
				progress(upstreams.Progress{Progress: float64(i), Total: &total, Message: "m"})
			}
			if i <= logsSent {
				upstreams.RelayFrom(ctx).Log(json.RawMessage(fmt.Sprintf(`{"level":"info","data":"line %d"}`, i)))
			}
		}
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	check := func(name string, got []string) {
		t.Helper()
		var progress, logs []string
		for _, e := range got {
			switch {
			case strings.HasPrefix(e, "progress "):
				progress = append(progress, e)
			case strings.HasPrefix(e, "log "):
				logs = append(logs, e)
			}
		}
		if len(progress) != pipeline.MaxNoteProgress || progress[0] != fmt.Sprintf("progress %d/%d m", progressSent-pipeline.MaxNoteProgress+1, progressSent) ||
			progress[len(progress)-1] != fmt.Sprintf("progress %d/%d m", progressSent, progressSent) {
			t.Errorf("%s: %d progress notifications replayed, %q; want the last %d", name, len(progress), ends(progress), pipeline.MaxNoteProgress)
		}
		if len(logs) != pipeline.MaxNoteLogs || logs[0] != "log line 1" || logs[len(logs)-1] != fmt.Sprintf("log line %d", pipeline.MaxNoteLogs) {
			t.Errorf("%s: %d log messages replayed, %q; want the first %d", name, len(logs), ends(logs), pipeline.MaxNoteLogs)
		}
		if got[len(got)-1] != "answer" {
			t.Errorf("%s: the answer came before notifications: %q", name, ends(got))
		}
	}
	p := dedupPipeline(t, up)
	newNotedClient().call(t, p, getOrder, true)
	c := newNotedClient()
	c.call(t, p, getOrder, true)
	check("replay", c.got())
	ps := replicas(t, 2, up, newFakeShared())
	newNotedClient().call(t, ps[0], getOrder, true)
	c = newNotedClient()
	c.call(t, ps[1], getOrder, true)
	check("another replica's replay", c.got())
	if up.Calls.Load() != 2 {
		t.Fatalf("%d executions, want 2", up.Calls.Load())
	}
	// A log line too big for the bytes left is dropped, with all after it.
	big := strings.Repeat("x", pipeline.MaxNoteLogBytes/2)
	bigUp := &notingUpstream{Fn: func(ctx context.Context, _ int32, _ func(upstreams.Progress)) (json.RawMessage, error) {
		for i := range 3 {
			upstreams.RelayFrom(ctx).Log(json.RawMessage(fmt.Sprintf(`{"level":"info","data":"%d%s"}`, i, big)))
		}
		upstreams.RelayFrom(ctx).Log(json.RawMessage(`{"level":"info","data":"small"}`))
		return json.RawMessage(pipelinetest.OKText), nil
	}}
	p = dedupPipeline(t, bigUp)
	newNotedClient().call(t, p, getOrder, false)
	c = newNotedClient()
	c.call(t, p, getOrder, false)
	if got := c.got(); len(got) != 2 || !strings.HasPrefix(got[0], "log 0x") {
		t.Fatalf("replay of big log lines: %d events, want the first line and the answer", len(got))
	}
}

// An interactive call's notifications may echo what its client said: its
// unknown outcome is replayed (TestInteractiveCallKeepsAtMostOnce), without
// them; under an idempotency key, with them.
func TestInteractiveCallNotificationsStayWithItsClient(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		up := &notingUpstream{Fn: func(ctx context.Context, _ int32, progress func(upstreams.Progress)) (json.RawMessage, error) {
			pipeline.NoteInteraction(ctx)
			sendNotes(ctx, progress)
			return nil, pipelinetest.Broken
		}}
		p := dedupPipeline(t, up)
		call := getOrder
		if keyed {
			call.IdempotencyKey = "k"
		}
		newNotedClient().call(t, p, call, true)
		c := newNotedClient()
		env := c.call(t, p, call, true)
		want := []string{"answer"}
		if keyed {
			want = notesSent
		}
		if got := c.got(); up.Calls.Load() != 1 || !env.Replayed || !slices.Equal(got, want) {
			t.Errorf("keyed=%v: %d executions, replayed=%v, sent %q, want %q", keyed, up.Calls.Load(), env.Replayed, got, want)
		}
	}
}

// ends is the first and the last of events.
func ends(events []string) []string {
	if len(events) <= 2 {
		return events
	}
	return []string{events[0], events[len(events)-1]}
}
