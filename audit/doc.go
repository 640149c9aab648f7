// Package audit keeps the tamper-evident audit trail: one JSON line per
// decision (a tools/call, an approval action, a policy reload, a pin
// change), each line chained to the one before it by a SHA-256 hash, so
// that an edited, deleted or reordered line is detected by Verify.
//
// # The chain rule
//
// Every line is one JSON object followed by "\n", written with a single
// write call. Its first two members are
//
//   - "seq": 1 for the first record ever written, then +1 per record. It
//     keeps counting across rotated files and restarts of the gateway.
//   - "prev": the lowercase hex SHA-256 of the exact bytes of the previous
//     line, without its newline. For the first line of a file that is the
//     last line of the next-older file (rotation does not break the
//     chain). For the record with seq 1 it is 64 zeros (ZeroHash).
//
// So a file whose first record has seq > 1 starts mid-chain (its
// predecessors were rotated away); Verify accepts that as long as
// everything that is there is consistent, and says so in its Report. The
// chain proves the order and integrity of what is present. It cannot tell
// that records were cut off the end of the newest file: write Report.LastHash
// down elsewhere (a ticket, another system's log) to anchor it.
//
// # Files
//
// The trail is Options.Path. Before a record would take the file past
// MaxBytes, the file is renamed to Path.1 (Path.1 to Path.2, and so on;
// Path.<MaxFiles> is deleted) and a new Path continues the chain. Open
// continues the chain from the last line of an existing Path (or of Path.1
// when Path is missing or empty, as after a crash mid-rotation), and
// refuses to start on a last line it cannot parse: continuing would chain
// new records to a line nobody can check. One process writes a trail at a
// time (an flock on Path.lock, held for the Log's life).
//
// # A trail per process
//
// Two writers would fork the chain, so a second process on the same file
// (the Claude Desktop stdio gateway beside a running HTTP one, on one
// config) does not share it: Open takes the first slot no live process
// holds, SlotPath(Path, n) = Path with "-n" before its extension
// (toolgate.audit-2.log, toolgate.audit-3.log, …), up to Options.Slots
// trails in all (DefaultSlots, 8; 1 means no fallback). Each slot is a
// trail like Path: its own single-writer chain, its own lock
// (toolgate.audit-2.log.lock), its own rotation (toolgate.audit-2.log.1).
// Slots are reused: the flock dies with its process, and the next process
// that needs a slot takes the lowest free one and continues that slot's
// chain, so no file is left behind per process. With every slot held Open
// fails, naming the file and the number of slots. Log.Path says which
// trail a Log writes; Trails lists the trails of a file that exist, Files
// the files of one trail, oldest first, for Verify, which checks one
// trail (one chain) at a time.
//
// The file holds argument digests and, if configured, arguments: it is
// created 0600. A digest is an unkeyed SHA-256, so whoever can read the
// file can confirm a guess of a call's full arguments; protect it like
// the arguments themselves.
package audit
