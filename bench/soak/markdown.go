package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// write writes the Markdown report to out and the JSON beside it (same name, .json).
func write(out string, r *Report) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	md := markdown(r)
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	jsonPath := strings.TrimSuffix(out, filepath.Ext(out)) + ".json"
	if err := os.WriteFile(jsonPath, append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Print(md)
	logf("wrote %s and %s", out, jsonPath)
	return nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// markdown renders the report.
func markdown(r *Report) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	m := r.Machine
	p("# toolgate soak run\n\n")
	p("%s, %d cores, %s, Linux %s, %s, toolgate %s. Load average before: %s.\n\n",
		m.CPU, m.Cores, m.Go, m.Kernel, m.Date.Format("2006-01-02 15:04 UTC"), m.Toolgate, m.LoadAvg)
	o := r.Params
	p("%d calls (after %d warm-up calls) at %d callers, each with its own Streamable HTTP session, half to a stdio "+
		"upstream and half to a Streamable HTTP one; %.3g%% of each upstream's calls get an injected fault, drawn evenly "+
		"from %s (stdio) and %s (HTTP); %.3g%% of the calls repeat earlier arguments; per-server timeout %s.\n\n",
		o.Calls, o.Warmup, o.Concurrency, o.FaultRate*100, o.StdioFaults, o.HTTPFaults, o.Repeat*100, o.Timeout)

	p("## Calls\n\n")
	p("| phase | calls | elapsed s | calls/s | p50 ms | p99 ms | p99.9 ms | max ms |\n|---|---|---|---|---|---|---|---|\n")
	for _, ph := range []struct {
		name string
		ph   Phase
	}{{"warm-up", r.Warmup}, {"main", r.Main}} {
		p("| %s | %d | %.1f | %.0f | %.3g | %.3g | %.4g | %.4g |\n", ph.name, ph.ph.Calls(), ph.ph.Elapsed.Seconds(), ph.ph.Rate,
			ph.ph.P50MS, ph.ph.P99MS, ph.ph.P999MS, ph.ph.MaxMS)
	}
	p("\nOutcomes of the main calls (the envelope's `error_code`; `ok` when the call succeeded and carried its own arguments back):\n\n")
	codes := map[string]bool{}
	for _, t := range r.Main.Servers {
		for c := range t.ByCode {
			codes[c] = true
		}
	}
	p("| outcome | stdio | http | total |\n|---|---|---|---|\n")
	for _, c := range sortedKeys(codes) {
		s, h := r.Main.Servers[stdioServer].ByCode[c], r.Main.Servers[httpServer].ByCode[c]
		p("| %s | %d | %d | %d |\n", c, s, h, s+h)
	}
	s, h := r.Main.Servers[stdioServer], r.Main.Servers[httpServer]
	p("| (calls) | %d | %d | %d |\n", s.Calls, h.Calls, s.Calls+h.Calls)
	p("| (repeated arguments) | %d | %d | %d |\n", s.Repeats, h.Repeats, s.Repeats+h.Repeats)
	p("| (answered `replayed: true`) | %d | %d | %d |\n", s.Replayed, h.Replayed, s.Replayed+h.Replayed)
	if len(r.Main.FirstErrs) > 0 {
		p("\nFirst message per outcome:\n\n")
		for _, c := range sortedKeys(r.Main.FirstErrs) {
			p("- `%s`: %s\n", c, truncate(r.Main.FirstErrs[c], 300))
		}
	}

	p("\n## Faults injected (the upstreams' own logs, warm-up included)\n\n")
	for _, server := range sortedKeys(r.Faults.Injected) {
		total := 0
		var parts []string
		for _, k := range sortedKeys(r.Faults.Injected[server]) {
			total += r.Faults.Injected[server][k]
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Faults.Injected[server][k]))
		}
		p("- %s: %d (%s)\n", server, total, strings.Join(parts, ", "))
	}

	p("\n## The gateway\n\n")
	p("| figure | idle, before the calls | start (after the warm-up) | middle | end (last call) | end (after %s) |\n|---|---|---|---|---|---|\n", o.Settle)
	rss := func(k string) string {
		if v, ok := r.RSS[k]; ok {
			return mb(v)
		}
		return "n/a"
	}
	gor := func(k string) string {
		if v, ok := r.Goroutines[k]; ok {
			return fmt.Sprint(v)
		}
		return "n/a"
	}
	p("| RSS MB | %s | %s | %s | %s | %s |\n", rss("idle_before"), rss("start"), rss("middle"), rss("end"), rss("end_settled"))
	p("| goroutines | %s | %s | %s | %s | %s |\n", gor("idle_before"), gor("start"), gor("middle"), gor("end_calls"), gor("end"))
	p("\nPeak RSS over the main calls (VmHWM): %s MB. Gateway CPU over the main calls: %.1f s (%.0f µs per call). "+
		"Other processes used %.0f%% of the machine's CPU meanwhile.\n",
		mb(r.RSS["peak"]), r.GatewayCPU.Seconds(), float64(r.GatewayCPU.Microseconds())/float64(max(1, r.Main.Calls())), r.OtherCPU)
	c := r.Children
	p("\nChild processes of the gateway at the end: %d (stdio upstreams configured: %d; zombies: %d; all descendants: %d): %s.\n",
		len(c.AtEnd), c.StdioUpstreams, c.Zombies, c.Descendants, strings.Join(c.AtEnd, "; "))
	if len(c.Orphans) > 0 {
		p("Upstream processes not below the gateway (lost track of): %s.\n", strings.Join(c.Orphans, "; "))
	} else {
		p("No process running the upstream binary other than the gateway's child and the soak's HTTP upstream.\n")
	}
	if len(c.LeftAfterStop) > 0 {
		p("Upstream processes still alive after the gateway stopped: %s.\n", strings.Join(c.LeftAfterStop, "; "))
	} else {
		p("No upstream process of the gateway was left after it stopped (SIGTERM).\n")
	}
	mt := r.Metrics
	p("\n/metrics at the end: `toolgate_calls_total` %s; restarts %s; duplicates suppressed %s; audit write errors %.0f; upstream attempts %s.\n",
		fmtMap(mt.CallsTotal), fmtMap(mt.Restarts), fmtMap(mt.Duplicates), mt.AuditErrors, fmtMap(mt.UpstreamOutcome))

	p("\n## Audit trail\n\n")
	a := r.Audit
	p("Files: %s. Lines: %d, by kind: %s. `toolgate audit verify`: %s (%s).\n\n", strings.Join(baseNames(a.Files), ", "), a.Lines,
		fmtIntMap(a.ByKind), map[bool]string{true: "intact", false: "FAILED"}[a.VerifyOK], strings.ReplaceAll(a.Verify, "\n", "; "))
	p("Call records: %d; calls made (warm-up and main, every one answered by the gateway): %d; difference %+d.\n",
		a.CallRecords, a.CallsMade, a.CallRecords-a.CallsMade)
	if len(a.Diffs) == 0 {
		p("Per tool and outcome, the records equal the client's count exactly.\n")
	} else {
		p("Where the records differ from the client's outcomes, per tool and outcome:\n\n")
		for _, d := range a.Diffs {
			p("- %s\n", d)
		}
	}
	if len(r.Notes) > 0 {
		p("\n## Notes\n\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	return b.String()
}

func fmtMap(m map[string]float64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func fmtIntMap(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func baseNames(files []string) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Base(f)
	}
	return out
}
