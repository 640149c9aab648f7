// Package statefile makes durable, atomic, cross-process-locked writes of
// small state files (the pins lock file, the approvals file): Lock takes an
// exclusive flock on <file>.lock for a read-change-write cycle, WriteAtomic
// replaces the file so that a reader or a crash sees the old content or the
// new, never a part, and CleanStale removes the temporary files a crashed
// writer left behind.
package statefile
