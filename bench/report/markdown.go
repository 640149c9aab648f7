package report

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	b.WriteString("# toolgate load harness\n\n")
	fmt.Fprintf(&b, "Command: `%s`\n\n", r.Command)
	m := r.Machine
	fmt.Fprintf(&b, "Machine: %s, %d cores; %s; Node %s; Linux %s; %s. toolgate %s.\n\n",
		m.CPU, m.Cores, m.Go, m.Node, m.Kernel, m.Date.UTC().Format("2006-01-02 15:04 MST"), m.Toolgate)
	s := r.Settings
	fmt.Fprintf(&b, "Each cell: %.1f s warm-up, then %.1f s of calls back to back per worker; %d rounds, interleaved "+
		"(each round measures every cell once, targets in a rotated order); figures are medians over rounds, "+
		"peak RSS the largest.%s%s\n\n", s.WarmupS, s.DurationS, s.Rounds, settleNote(s.SettleS), quickNote(s.Quick))
	if s.Client != "" {
		fmt.Fprintf(&b, "Load client: %s.\n\n", s.Client)
	}
	if len(r.Rows) > 0 {
		b.WriteString("## Side by side\n\n")
		writeRows(&b, r.Rows, true)
		writeErrors(&b, r.Rows)
		writeRelayRounds(&b, r.Rows)
		writeBaselineRounds(&b, r.Rows)
	}
	if r.Scaling != nil {
		writeScaling(&b, r.Scaling)
	}
	if len(r.Notes) > 0 {
		b.WriteString("## How to read it\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func settleNote(max float64) string {
	if max <= 0 {
		return ""
	}
	return fmt.Sprintf(" Before each cell the harness waits (at most %.0f s) until other processes use under 10%% of the machine's CPU for 0.3 s.", max)
}

func quickNote(quick bool) string {
	if quick {
		return " **Quick (smoke) run: too short for conclusions.**"
	}
	return ""
}

// writeRows writes the side-by-side table; vsDirect adds the ratio columns,
// to direct and to the zero-check relay.
func writeRows(b *strings.Builder, rows []Row, vsDirect bool) {
	b.WriteString("| upstream | target | conc | p50 ms | p99 ms | calls/s |")
	if vsDirect {
		b.WriteString(" p50 × direct | calls/s × direct | p50 × relay | calls/s × relay |")
	}
	b.WriteString(" gateway CPU µs/call | upstream CPU µs/call | client CPU µs/call | gateway peak RSS MB | errors | other CPU % |\n")
	cols := 16
	if !vsDirect {
		cols = 12
	}
	b.WriteString("|" + strings.Repeat("---|", cols) + "\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %s | %s | %d |", r.Upstream, r.Target, r.Concurrency)
		if r.NA != "" {
			fmt.Fprintf(b, " n/a: %s |%s\n", oneLine(r.NA, 160), strings.Repeat(" – |", cols-4))
			continue
		}
		fmt.Fprintf(b, " %s | %s | %s |", ms(r.P50Ms), ms(r.P99Ms), num(r.Throughput))
		if vsDirect {
			fmt.Fprintf(b, " %s | %s | %s | %s |", ratio(r.P50Ratio), ratio(r.TputRatio), ratio(r.P50VsRelay), ratio(r.TputVsRelay))
		}
		fmt.Fprintf(b, " %s | %s | %s | %s | %d | %.0f |\n", cpu(r.GatewayCPU), cpu(r.UpstreamCPU), cpu(r.ClientCPU), mb(r.PeakRSSMB), r.Errors, r.OtherCPUPct)
	}
	b.WriteString("\n")
}

func writeErrors(b *strings.Builder, rows []Row) {
	first := true
	for _, r := range rows {
		if r.Errors == 0 || r.FirstError == "" {
			continue
		}
		if first {
			b.WriteString("Errors (the first of each cell):\n\n")
			first = false
		}
		fmt.Fprintf(b, "- %s / %s / %d: %s\n", r.Upstream, r.Target, r.Concurrency, oneLine(r.FirstError, 300))
	}
	if !first {
		b.WriteString("\n")
	}
}

// writeRelayRounds writes, for each row with ratios to the relay by round,
// their median, their range and how many rounds were on toolgate's side of
// 1: a ratio of medians near 1 may be the machine drifting between rounds,
// and the rounds show whether it is.
func writeRelayRounds(b *strings.Builder, rows []Row) {
	writeRounds(b, rows, roundsSection{
		title: "Against the relay, round by round",
		intro: "Each round's cell over the relay's cell of the same round (same upstream, transport and callers; " +
			"rounds where either side failed or had errors left out): the median of those ratios, the lowest and highest, " +
			"and in how many rounds toolgate was at least as fast (calls/s ≥ 1.00, p50 ≤ 1.00, as printed).",
		header: "| upstream | target | conc | calls/s × relay, median (range) | rounds ≥ 1 | p50 × relay, median (range) | rounds ≤ 1 |",
		ratios: func(r Row) []RoundRatio { return r.VsRelayRounds },
	})
}

// writeBaselineRounds writes the same for each toolgate row measured
// beside a baseline binary, over the baseline's cell, gateway CPU a call
// included: a change against the build before it, free of the drift
// between rounds.
func writeBaselineRounds(b *strings.Builder, rows []Row) {
	writeRounds(b, rows, roundsSection{
		title: "Against the baseline, round by round",
		intro: "Each round's toolgate cell over the baseline binary's cell of the same round (same upstream, transport and callers; " +
			"rounds where either side failed or had errors left out): the median, the lowest and highest, and in how many rounds " +
			"toolgate was at least as fast (calls/s ≥ 1.00, p50 ≤ 1.00) or cheaper (gateway CPU a call ≤ 1.00).",
		header: "| upstream | target | conc | calls/s × baseline | rounds ≥ 1 | p50 × baseline | rounds ≤ 1 | gateway CPU × baseline | rounds ≤ 1 |",
		ratios: func(r Row) []RoundRatio { return r.VsBaselineRounds },
		cpu:    true,
	})
}

// roundsSection is one table of per-round ratios: which ratios of a row,
// and whether gateway CPU a call is a column.
type roundsSection struct {
	title, intro, header string
	ratios               func(Row) []RoundRatio
	cpu                  bool
}

// writeRounds writes the section's table, a row per measured row with
// ratios, and nothing when no row has any.
func writeRounds(b *strings.Builder, rows []Row, sec roundsSection) {
	first := true
	atLeast1 := func(x float64) bool { return x >= 1 }
	atMost1 := func(x float64) bool { return x <= 1 }
	for _, r := range rows {
		ratios := sec.ratios(r)
		if r.NA != "" || len(ratios) == 0 {
			continue
		}
		if first {
			fmt.Fprintf(b, "### %s\n\n%s\n\n%s\n|%s\n", sec.title, sec.intro, sec.header, strings.Repeat("---|", strings.Count(sec.header, "|")-1))
			first = false
		}
		var tput, p50, cpu []float64
		for _, x := range ratios {
			tput, p50 = append(tput, x.Throughput), append(p50, x.P50)
			if x.GatewayCPU > 0 {
				cpu = append(cpu, x.GatewayCPU)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s |", r.Upstream, r.Target, r.Concurrency,
			spread(tput), count(tput, atLeast1), spread(p50), count(p50, atMost1))
		if sec.cpu {
			fmt.Fprintf(b, " %s | %s |", spread(cpu), count(cpu, atMost1))
		}
		b.WriteString("\n")
	}
	if !first {
		b.WriteString("\n")
	}
}

// spread is "median (lowest–highest)" of v, each to two decimals.
func spread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	s := slices.Sorted(slices.Values(v))
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med, s[0], s[n-1])
}

// count is "k of n": how many of v satisfy ok once rounded to two
// decimals, as the table prints them (0.996 counts as 1.00).
func count(v []float64, ok func(float64) bool) string {
	k := 0
	for _, x := range v {
		if ok(math.Round(x*100) / 100) {
			k++
		}
	}
	return fmt.Sprintf("%d of %d", k, len(v))
}

// writeWarmups says how long each variant was warmed up before its rounds
// (bench/scaling: until its calls stopped faulting in fresh memory).
func writeWarmups(b *strings.Builder, rule string, ws []Warmup) {
	if len(ws) == 0 {
		return
	}
	b.WriteString(rule + ":")
	for i, w := range ws {
		sep := ";"
		if i == len(ws)-1 {
			sep = "."
		}
		switch {
		case w.Errors > 0:
			fmt.Fprintf(b, " %s: stopped by %d failed calls (%s)%s", w.Variant, w.Errors, oneLine(w.FirstError, 160), sep)
			continue
		case w.FirstCalls == 0:
			fmt.Fprintf(b, " %s: could not be measured%s", w.Variant, sep)
			continue
		}
		unsettled := ""
		if !w.Settled {
			unsettled = "; not settled"
		}
		fmt.Fprintf(b, " %s, %s calls in %.1f s (the first batch %s calls in %.1f s and %s page faults, the last %.2f faults a call%s)%s",
			w.Variant, Thousands(w.Calls), w.Seconds, Thousands(w.FirstCalls), w.FirstSeconds, Thousands(int(w.FirstFaults)),
			w.LastFaults, unsettled, sep)
	}
	b.WriteString("\n\n")
}

func writeScaling(b *strings.Builder, s *Scaling) {
	b.WriteString("## Scaling (toolgate over Streamable HTTP, Go echo upstream)\n\n")
	for _, g := range s.Cost {
		fmt.Fprintf(b, "### Per-call cost: %s\n\n", g.Name)
		b.WriteString("| variant | conc | p50 ms | p99 ms | calls/s | p50 × first | calls/s × first | gateway CPU µs/call | CPU × first | errors |\n")
		b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
		for _, r := range g.Variants {
			if r.NA != "" {
				fmt.Fprintf(b, "| %s | %d | n/a: %s | – | – | – | – | – | – | – |\n", r.Target, r.Concurrency, oneLine(r.NA, 160))
				continue
			}
			base := baseline(g.Variants, r.Concurrency)
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Target, r.Concurrency,
				ms(r.P50Ms), ms(r.P99Ms), num(r.Throughput), ratio(div(r.P50Ms, base.P50Ms)),
				ratio(div(r.Throughput, base.Throughput)), cpu(r.GatewayCPU), ratio(div(r.GatewayCPU, base.GatewayCPU)), r.Errors)
		}
		b.WriteString("\n")
		writeWarmups(b, g.WarmupRule, g.Warmups)
	}
	if len(s.ToolsList) > 0 {
		b.WriteString("### tools/list, filtered per principal\n\n| catalog tools | principal | tools visible | calls | p50 ms | p99 ms |\n|---|---|---|---|---|---|\n")
		for _, r := range s.ToolsList {
			fmt.Fprintf(b, "| %s | %s | %s | %d | %s | %s |\n", Thousands(r.Catalog), r.Principal, Thousands(r.Visible), r.Calls, ms(r.P50Ms), ms(r.P99Ms))
		}
		b.WriteString("\n")
	}
	if len(s.Memory) > 0 {
		b.WriteString("### Gateway memory (VmRSS)\n\n| situation | RSS MB | note |\n|---|---|---|\n")
		for _, r := range s.Memory {
			fmt.Fprintf(b, "| %s | %s | %s |\n", r.Situation, mb(r.RSSMB), r.Note)
		}
		b.WriteString("\n")
	}
	for _, f := range s.Failed {
		fmt.Fprintf(b, "- not measured: %s\n", oneLine(f, 300))
	}
	if len(s.Failed) > 0 {
		b.WriteString("\n")
	}
}

// baseline is the first measured variant at concurrency c.
func baseline(rows []Row, c int) Row {
	for _, r := range rows {
		if r.Concurrency == c && r.NA == "" {
			return r
		}
	}
	return Row{}
}

func div(a, b float64) float64 {
	if b <= 0 || a < 0 {
		return 0
	}
	return a / b
}

func ms(v float64) string {
	switch {
	case v < 1:
		return fmt.Sprintf("%.3f", v)
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

// Thousands writes n with thousands separators.
func Thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func num(v float64) string { return fmt.Sprintf("%.0f", v) }

func ratio(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", v)
}

func cpu(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

func mb(v float64) string {
	if v <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}

// oneLine keeps a message on one table line: no newlines or pipes, at most
// n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "|", "/")), " ")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}
