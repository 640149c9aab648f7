package redact

import "strings"

// Lines redacts a stream of lines, such as a child process's stderr, that
// is read and logged one line at a time: a PEM private key spans lines, so
// once a line opens one, every line up to and including its END line is
// replaced whole. Each Lines is for one stream and one goroutine.
type Lines struct {
	r     *Redactor
	inKey bool
}

// Lines is a line redactor for one stream; nil redacts nothing.
func (r *Redactor) Lines() *Lines {
	if r == nil {
		return nil
	}
	return &Lines{r: r}
}

// Line is line redacted.
func (l *Lines) Line(line string) string {
	if l == nil {
		return line
	}
	if l.inKey {
		if strings.Contains(line, "-----END") {
			l.inKey = false
		}
		return "[redacted:" + PrivateKey + "]"
	}
	out := l.r.Text(line)
	if l.r.pemKey && strings.Contains(line, "-----BEGIN") && strings.Contains(line, "PRIVATE KEY") && !strings.Contains(line, "-----END") {
		l.inKey = true
	}
	return out
}
