package config

import (
	"fmt"
	"regexp"
	"strings"
)

// envName is what a variable reference and an env key may be: a portable shell variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// expand replaces ${VAR} and ${VAR:-default} in s with values from env. "$${" stands for a literal "${"
// so a value can contain that sequence. Like the shell, ":-" also applies the default when VAR is set but
// empty. It returns the variables referenced without a default that are unset, all of them, so the caller
// can report them together; err is a malformed reference.
func expand(s string, env func(string) (string, bool)) (out string, unset []string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", nil, fmt.Errorf(`unterminated "${" (write "$${" for a literal "${")`)
			}
			val, ok, err := lookup(s[i+2:i+2+end], env)
			if err != nil {
				return "", nil, err
			}
			if !ok {
				unset = append(unset, s[i+2:i+2+end])
			}
			b.WriteString(val)
			i += end + 3
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), unset, nil
}

// lookup resolves the inside of one ${...}; ok is false when the variable is unset and has no default.
func lookup(ref string, env func(string) (string, bool)) (val string, ok bool, err error) {
	name, def, hasDef := strings.Cut(ref, ":-")
	if !envName.MatchString(name) {
		return "", false, fmt.Errorf("invalid reference ${%s}: expected ${NAME} or ${NAME:-default}", ref)
	}
	v, set := env(name)
	switch {
	case set && (v != "" || !hasDef):
		return v, true, nil
	case hasDef:
		return def, true, nil
	}
	return "", false, nil
}
