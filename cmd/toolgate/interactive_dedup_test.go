package main

import (
	"os"
	"strings"
	"testing"
)

// With duplicate suppression on (a one-minute window, as by default), a
// call during which the upstream asked the client something runs for
// every request: the second elicitation call asks the client again and is
// not "replayed" with the first one's answer (issue 17, item 2).
func TestInteractiveCallsAreNotReplayed(t *testing.T) {
	path := writeConfig(t, everythingServer(t))
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	write(t, path, strings.Replace(string(cfg), "dedup: {window: 0s}", "dedup: {window: 1m}", 1))
	url, logs := httpGateway(t, path)
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	answers := &clientAnswers{asked: make(chan string, 8)}
	c := connectVersion(t, url, aliceKey, "2025-11-25", answers)
	for i := range 2 {
		_, env := callE2E(t, c, "everything__trigger-elicitation-request", `{}`)
		if env["ok"] != true || env["replayed"] == true {
			t.Fatalf("call %d: %v (want its own answer, not a replay)", i+1, env)
		}
		asked := false
		for drained := false; !drained; {
			select {
			case got := <-answers.asked:
				asked = asked || got == "elicitation"
			default:
				drained = true
			}
		}
		if !asked {
			t.Fatalf("call %d: the client was not asked", i+1)
		}
	}
}
