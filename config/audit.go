package config

import (
	"cmp"
	"strings"
)

// The values of audit.fsync.
const (
	AuditFsyncAlways   = "always"   // every record is on disk before the call's answer goes out
	AuditFsyncInterval = "interval" // records are flushed every audit.fsync_interval
	AuditFsyncNever    = "never"    // the operating system flushes when it likes
)

var auditFsyncModes = []string{AuditFsyncAlways, AuditFsyncInterval, AuditFsyncNever}

// checkAudit checks audit:. fsync_interval without fsync: interval is refused, because it suggests the
// operator believes records are flushed on a timer when they are not. redact without include_args is
// allowed: the list is a safety net that must already be in place when someone turns arguments on.
func (l *loader) checkAudit(x *Audit) {
	if x.File != "" && strings.TrimSpace(x.File) != x.File {
		l.reportAt("audit.file", "expected a file path without leading or trailing spaces, got %q", x.File)
	}
	if strings.HasSuffix(x.File, "/") {
		l.reportAt("audit.file", "expected a file, got the directory %q", x.File)
	}
	l.checkOneOf("audit.fsync", x.Fsync, auditFsyncModes)
	inRange := l.checkDuration("audit.fsync_interval", x.FsyncInterval, auditFsyncIntervalRange)
	if x.FsyncInterval != 0 && inRange && cmp.Or(x.Fsync, DefaultAuditFsync) != AuditFsyncInterval && !l.bad["audit.fsync"] {
		l.reportAt("audit.fsync_interval", "applies only with fsync: interval (fsync is %s); remove it or set fsync: interval",
			cmp.Or(x.Fsync, DefaultAuditFsync))
	}
	l.checkBytes("audit.max_bytes", x.MaxBytes, auditMaxBytesRange)
	l.checkCount("audit.max_files", x.MaxFiles, auditMaxFilesRange)
	first := map[string]int{}
	for i, p := range x.Redact {
		path := index("audit.redact", i)
		switch j, dup := first[p]; {
		case !validFieldPath(p):
			l.reportAt(path, "expected a field name or a dotted path such as \"card.number\", got %q", p)
		case dup:
			l.reportAt(path, "%q is listed twice (also at audit.redact[%d])", p, j)
		default:
			first[p] = i
		}
	}
}

// validFieldPath accepts "password" and "card.number": no empty part, no spaces around a part.
func validFieldPath(p string) bool {
	for part := range strings.SplitSeq(p, ".") {
		if part == "" || strings.TrimSpace(part) != part {
			return false
		}
	}
	return true
}
