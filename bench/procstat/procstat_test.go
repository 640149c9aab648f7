package procstat

import (
	"os"
	"testing"
)

// MinorFaults counts the pages a process touches for the first time: 64 MiB
// written once, a page at a time, must add at least one fault per 2 MiB
// (huge pages, if the kernel gives them, map 2 MiB at a fault; 4 KiB pages
// 512 times as many).
func TestMinorFaultsCountsFreshPages(t *testing.T) {
	before, err := MinorFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	fresh := make([]byte, 64<<20)
	for i := 0; i < len(fresh); i += 4096 {
		fresh[i] = 1
	}
	after, err := MinorFaults(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := after - before; got < 32 {
		t.Fatalf("64 MiB of fresh pages took %d minor faults, want at least 32", got)
	}
}

// A process that is gone is an error, not zero faults.
func TestMinorFaultsOfNoProcess(t *testing.T) {
	if n, err := MinorFaults(1 << 30); err == nil {
		t.Fatalf("MinorFaults of no process = %d, want an error", n)
	}
}
