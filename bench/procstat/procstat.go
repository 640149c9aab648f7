// Package procstat reads what the load harness reports about processes from
// /proc: CPU time (utime+stime), resident memory (VmRSS, VmHWM) and process
// trees. It reads other processes rather than asking them, so the figures
// cost the measured processes nothing and need no cooperation from peers
// written in other languages.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// tick is one clock tick of /proc/<pid>/stat. USER_HZ is 100 on every Linux
// architecture Go supports, whatever the kernel's own HZ, so no sysconf.
const tick = 10 * time.Millisecond

// Times is one process's CPU time so far.
type Times struct {
	Self     time.Duration // utime + stime
	Children time.Duration // cutime + cstime: children it has reaped
}

// CPU reads the CPU time of pid.
func CPU(pid int) (Times, error) {
	f, err := statFields(pid)
	if err != nil {
		return Times{}, err
	}
	// Fields after the command, counted from field 3 (state): utime is
	// field 14, stime 15, cutime 16, cstime 17 (proc(5)).
	n := func(field int) time.Duration {
		v, _ := strconv.ParseInt(f[field-3], 10, 64)
		return time.Duration(v) * tick
	}
	return Times{Self: n(14) + n(15), Children: n(16) + n(17)}, nil
}

// MinorFaults is how many minor page faults pid has taken so far: pages it
// touched for the first time (or again, after giving them back), each
// mapped by the kernel on the spot.
func MinorFaults(pid int) (int64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(f[10-3], 10, 64) // minflt is field 10 (proc(5))
}

// statFields returns the fields of /proc/<pid>/stat after "(comm)": the
// command may itself hold spaces and parentheses, so cut at the last ')'.
func statFields(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return f, nil
}

// Descendants lists every process below pid (children, grandchildren, ...),
// running or not yet reaped, from one pass over /proc.
func Descendants(pid int) []int {
	children := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		child, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if err != nil {
			continue
		}
		f, err := statFields(child)
		if err != nil {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], child)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, children[p]...)
		queue = append(queue, children[p]...)
	}
	return out
}

// TreeCPU is the CPU time of a set of processes, each read separately.
type TreeCPU map[int]Times

// ReadCPU reads the CPU time of each pid; a process that is gone is left out.
func ReadCPU(pids []int) TreeCPU {
	t := TreeCPU{}
	for _, p := range pids {
		if c, err := CPU(p); err == nil {
			t[p] = c
		}
	}
	return t
}

// Since is the CPU the processes of t used after before. A process that was
// not there before counts from its start. One that ended meanwhile is lost
// here; its parent's Children time catches it once reaped (see Times).
func (t TreeCPU) Since(before TreeCPU) time.Duration {
	var d time.Duration
	for pid, now := range t {
		d += now.Self - before[pid].Self
	}
	return d
}

// Memory is what /proc/<pid>/status says about resident memory, in bytes.
type Memory struct {
	RSS  int64 // VmRSS: resident now
	Peak int64 // VmHWM: the most resident since start or the last ResetPeak
}

// ReadMemory reads VmRSS and VmHWM of pid.
func ReadMemory(pid int) (Memory, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(raw), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(val), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			m.RSS = kb * 1024
		case "VmHWM":
			m.Peak = kb * 1024
		}
	}
	return m, nil
}

// ResetPeak sets pid's VmHWM back to its current VmRSS (clear_refs "5",
// Linux 4.0+), so that each measurement reports its own peak rather than
// the largest one so far. It needs the right to write the file (the
// process's owner or root).
func ResetPeak(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// CPUModel is the model name of the first CPU in /proc/cpuinfo.
func CPUModel() string {
	raw, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if key, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(key) == "model name" {
			return strings.TrimSpace(val)
		}
	}
	return "unknown"
}

// MachineBusy is the CPU time all processes of the machine have used, from
// the first line of /proc/stat (user, nice, system, irq, softirq, steal;
// guest time is already inside user).
func MachineBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		busy += v
	}
	return time.Duration(busy) * tick
}
