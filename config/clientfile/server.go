package clientfile

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// reader maps the servers of one file, collecting variables and warnings into im.
type reader struct {
	im        *Import
	path      string
	workspace string            // the folder ${workspaceFolder} stands for; "" when the file does not say
	sources   map[string]string // toolgate server name -> the client's
}

// headerNameRe is an HTTP header name (an RFC 9110 token), as toolgate accepts.
var headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")

// fieldNotes are fields of some client that toolgate has no equivalent for, with why.
var fieldNotes = map[string]string{
	"envFile":       "envFile %s is not read by toolgate: put the variables the server needs in its env, as ${NAME} for secrets, and set them where toolgate starts",
	"autoApprove":   "autoApprove is not imported: in toolgate, policy.csv decides which tools may run (and `a` lines which need a human approval)",
	"alwaysAllow":   "alwaysAllow is not imported: in toolgate, policy.csv decides which tools may run",
	"disabledTools": "disabledTools is not imported: deny those tools in policy.csv instead (p, imported, <server>/<tool>, call, deny)",
	"timeout":       "timeout is not imported (clients differ on its unit); set timeout: <duration> on the server in toolgate.yaml if the default does not suit",
}

// server maps one entry of the client's list.
func (r *reader) server(name, src string, raw json.RawMessage) (*Server, error) {
	var fields map[string]json.RawMessage
	if err := decode(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("expected an object with command (a local server) or url (a remote one)")
	}
	s := &Server{Name: name, Source: src}
	if name != src {
		r.warn(name, "renamed from %q, which is not a valid toolgate server name; its tools are called %s__<tool>", src, name)
	}
	str := func(key string) (string, error) {
		v, ok := fields[key]
		if !ok || string(v) == "null" {
			return "", nil
		}
		var out string
		if err := json.Unmarshal(v, &out); err != nil {
			return "", fmt.Errorf("%s: expected a string, got %s", key, describe(v))
		}
		return out, nil
	}
	typ, err := str("type")
	if err != nil {
		return nil, err
	}
	command, err := str("command")
	if err != nil {
		return nil, err
	}
	rawURL, err := str("url")
	if err != nil {
		return nil, err
	}
	switch {
	case command != "" && rawURL != "":
		return nil, fmt.Errorf("has both command (a local server) and url (a remote one); keep one")
	case command == "" && rawURL == "":
		return nil, fmt.Errorf("has neither command (a local server) nor url (a remote one), so there is nothing to connect to")
	}
	s.Transport = r.transport(name, typ, command != "", rawURL)

	for _, key := range slices.Sorted(maps.Keys(fields)) {
		v := fields[key]
		path := "mcpServers." + name + "." + key
		switch key {
		case "type", "command", "url":
		case "args":
			if err := r.args(s, v); err != nil {
				return nil, err
			}
		case "env":
			if s.Transport != "stdio" {
				r.warn(name, "env is not imported: toolgate passes env only to local (command) servers")
				continue
			}
			m, err := r.strMap(name, key, v)
			if err != nil {
				return nil, err
			}
			s.Env = map[string]string{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if !envNameRe.MatchString(k) {
					r.warn(name, "env %q is not imported: toolgate accepts env names of A-Z a-z 0-9 _ that do not start with a digit", k)
					continue
				}
				s.Env[k] = r.secretValue(name, path+"."+k, "env "+k, k, k, m[k])
			}
		case "headers":
			if s.Transport == "stdio" {
				r.warn(name, "headers are not imported: toolgate sends headers only to remote (url) servers")
				continue
			}
			m, err := r.strMap(name, key, v)
			if err != nil {
				return nil, err
			}
			s.Headers = map[string]string{}
			for _, k := range slices.Sorted(maps.Keys(m)) {
				if !headerNameRe.MatchString(k) {
					r.warn(name, "header %q is not imported: it is not a valid HTTP header name", k)
					continue
				}
				s.Headers[k] = r.secretValue(name, path+"."+k, "header "+k, k, headerVar(name, k), m[k])
			}
		case "cwd":
			cwd, err := str(key)
			if err != nil {
				return nil, err
			}
			if s.Transport != "stdio" {
				r.warn(name, "cwd is not imported: it applies only to local (command) servers")
				continue
			}
			s.Cwd = r.localPath(name, "cwd", r.value(name, path, cwd))
		case "disabled":
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return nil, fmt.Errorf("disabled: expected true or false, got %s", describe(v))
			}
			s.Disabled = b
		default:
			if note, ok := fieldNotes[key]; ok {
				if strings.Contains(note, "%s") {
					note = fmt.Sprintf(note, string(v))
				}
				r.warn(name, "%s", note)
				continue
			}
			r.warn(name, "%s is not imported: toolgate has no such server setting (the value was %s)", key, describeValue(key, v))
		}
	}
	if command != "" {
		if err := r.command(s, command); err != nil {
			return nil, err
		}
	}
	if rawURL != "" {
		s.URL = r.secretValue(name, "mcpServers."+name+".url", "url", "", envVarName(name)+"_URL", rawURL)
	}
	return s, nil
}

// command sets the program to run. A command line in command ("npx -y server") is split into the
// program and arguments put before args, as toolgate wants one program name there; a relative path is
// made absolute against the workspace when the file says which it is.
func (r *reader) command(s *Server, command string) error {
	c := r.value(s.Name, "mcpServers."+s.Name+".command", command)
	// A path with "/" may hold spaces (/Applications/My App/server); a program name may not.
	if fields := strings.Fields(c); len(fields) > 1 && !strings.ContainsRune(fields[0], '/') {
		if strings.ContainsAny(c, `"'\`) {
			return fmt.Errorf("command %q is a command line with quoting; put the program in command and its arguments in args", command)
		}
		r.warn(s.Name, "command %q is split into the program %q and arguments before args", command, fields[0])
		c = fields[0]
		s.Args = append(fields[1:], s.Args...)
	}
	if strings.ContainsRune(c, '/') {
		c = r.localPath(s.Name, "command", c)
	}
	s.Command = c
	return nil
}

// localPath makes a relative path absolute against the workspace (the folder VS Code and Cursor start
// servers in) when the file is in one, and otherwise warns: toolgate resolves it against the folder of
// toolgate.yaml.
func (r *reader) localPath(server, key, p string) string {
	if p == "" || filepath.IsAbs(p) || strings.HasPrefix(p, "$") {
		return p
	}
	if r.workspace != "" {
		abs := filepath.Join(escapeLiteral(r.workspace), p)
		r.warn(server, "%s %q is relative: written as %s, in the workspace of %s", key, p, abs, r.path)
		return abs
	}
	r.warn(server, "%s %q is relative: toolgate resolves it against the folder of toolgate.yaml, not where the client ran it; make it absolute", key, p)
	return p
}

// transport decides stdio, http or sse from type, command and url, warning where it had to guess.
func (r *reader) transport(name, typ string, hasCommand bool, rawURL string) string {
	switch typ {
	case "":
	case "stdio":
		if hasCommand {
			return "stdio"
		}
	case "http", "streamable-http", "streamableHttp":
		if !hasCommand {
			return "http"
		}
	case "sse":
		if !hasCommand {
			return "sse"
		}
	default:
		r.warn(name, "type %q is not one toolgate knows (stdio, http, sse); imported from what is set, which is %s", typ, map[bool]string{true: "command", false: "url"}[hasCommand])
		typ = ""
	}
	if typ != "" {
		r.warn(name, "type %q does not fit %s; imported as %s", typ,
			map[bool]string{true: "command", false: "url"}[hasCommand], map[bool]string{true: "stdio", false: "http"}[hasCommand])
	}
	if hasCommand {
		return "stdio"
	}
	if u, err := url.Parse(rawURL); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/sse") {
		r.warn(name, "url ends in /sse and has no type: imported as the older HTTP+SSE transport (type: sse); change it to http if the server speaks Streamable HTTP")
		return "sse"
	}
	return "http"
}

// args maps the argument list, turning secrets into variables.
func (r *reader) args(s *Server, v json.RawMessage) error {
	var list []json.RawMessage
	if err := json.Unmarshal(v, &list); err != nil {
		return fmt.Errorf("args: expected a list of strings, got %s", describe(v))
	}
	if s.Transport != "stdio" {
		r.warn(s.Name, "args are not imported: they apply only to local (command) servers")
		return nil
	}
	s.Args = []string{}
	prevFlag := ""
	for i, item := range list {
		a, err := scalar(item)
		if err != nil {
			return fmt.Errorf("args[%d]: expected a string, got %s", i, describe(item))
		}
		path := fmt.Sprintf("mcpServers.%s.args[%d]", s.Name, i)
		var out string
		switch flag, val, hasEq := strings.Cut(a, "="); {
		case strings.HasPrefix(a, "-") && hasEq && secretName(flag):
			out = r.value(s.Name, path, flag+"=") + r.secretValue(s.Name, path, fmt.Sprintf("argument %d", i), flag, flagVar(s.Name, flag), val)
		case prevFlag != "" && !strings.HasPrefix(a, "-"):
			out = r.secretValue(s.Name, path, fmt.Sprintf("argument %d (after %s)", i, prevFlag), prevFlag, flagVar(s.Name, prevFlag), a)
		default:
			out = r.secretValue(s.Name, path, fmt.Sprintf("argument %d", i), "", fmt.Sprintf("%s_ARG%d", envVarName(s.Name), i), a)
		}
		s.Args = append(s.Args, out)
		prevFlag = ""
		if strings.HasPrefix(a, "-") && !strings.Contains(a, "=") && secretName(a) {
			prevFlag = a
		}
	}
	return nil
}

// strMap reads an object of strings; numbers and booleans are taken as their text, null is skipped
// with a warning (VS Code uses it to unset a variable, which toolgate's allowlisted child environment
// does anyway).
func (r *reader) strMap(name, key string, v json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("%s: expected an object of strings, got %s", key, describe(v))
	}
	out := map[string]string{}
	for k, item := range m {
		if string(item) == "null" {
			r.warn(name, "%s %q is null and is not imported (a local server gets only the variables toolgate passes it)", key, k)
			continue
		}
		s, err := scalar(item)
		if err != nil {
			return nil, fmt.Errorf("%s[%q]: expected a string, got %s", key, k, describe(item))
		}
		out[k] = s
	}
	return out, nil
}

// scalar is a string, or the text of a number or boolean.
func scalar(v json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return "", err
	}
	switch x.(type) {
	case float64, bool:
		return string(v), nil
	}
	return "", fmt.Errorf("not a scalar")
}

func (r *reader) warn(server, format string, args ...any) {
	r.im.Warnings = append(r.im.Warnings, Warning{Server: server, Msg: fmt.Sprintf(format, args...)})
}

// describe names the JSON type of v, for messages; it never quotes the value (it may be a secret).
func describe(v json.RawMessage) string {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return "invalid JSON"
	}
	switch x.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	}
	return "an object"
}

// describeValue shows a value that cannot be a secret (a boolean, a number, a short string under a
// name that does not say credential and without a credential's shape), and only the type of anything
// else: the warning is printed and written as a comment.
func describeValue(key string, v json.RawMessage) string {
	var x any
	_ = json.Unmarshal(v, &x)
	switch x := x.(type) {
	case bool, float64:
		return string(v)
	case string:
		if len(x) <= 40 && !secretName(key) && !looksSecret(x) && !strings.Contains(x, "://") {
			return string(v)
		}
	}
	return describe(v)
}
