package clientfile

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// envRefRe finds the environment references a file makes, ${env:NAME} (VS Code, Cursor) and ${NAME}
	// (Claude Code's .mcp.json), so that they keep their names and secrets pick other ones.
	envRefRe   = regexp.MustCompile(`\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)\}`)
	notVarChar = regexp.MustCompile(`[^A-Z0-9_]+`)
	schemeRe   = regexp.MustCompile(`^(?i)(bearer|basic|token|apikey)(\s+)(\S+)$`)
	// schemeOnlyRe is the literal part of "Bearer ${input:token}": a scheme and nothing secret.
	schemeOnlyRe = regexp.MustCompile(`^(?i)(bearer|basic|token|apikey)\s*$`)
)

// secretWords make a name (of an env variable, header or flag) a credential's.
var secretWords = []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "AUTH", "CREDENTIAL", "COOKIE"}

// secretName reports whether a name says its value is a credential.
func secretName(name string) bool {
	n := strings.ToUpper(name)
	// GIT_AUTHOR_NAME names a person, not a credential; AUTHORIZATION stays one.
	n = strings.ReplaceAll(strings.ReplaceAll(n, "AUTHORIZ", "AUTHZ"), "AUTHOR", "")
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// tokenPrefixes start the credentials of common services.
var tokenPrefixes = []string{
	"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-", "sk_live_", "sk_test_",
	"rk_live_", "xoxb-", "xoxp-", "xoxa-", "xapp-", "AKIA", "ASIA", "AIza", "npm_", "hf_", "pypi-",
	"lin_api_", "ntn_", "secret_", "dop_v1_", "shpat_",
}

// looksSecret reports whether a literal has the shape of a credential, whatever its key is called: a
// known token prefix, an authorization scheme with a value, a JWT, or a long string mixing upper and
// lower case and digits, or long hex, that is not a path or URL. A false positive costs one more
// variable to set; a false negative copies a credential into toolgate.yaml.
func looksSecret(s string) bool {
	if schemeRe.MatchString(s) {
		return true
	}
	for _, p := range tokenPrefixes {
		if strings.HasPrefix(s, p) && len(s) >= len(p)+8 {
			return true
		}
	}
	if strings.HasPrefix(s, "eyJ") && strings.Count(s, ".") == 2 {
		return true
	}
	if len(s) < 20 || strings.ContainsAny(s, " \t\n/\\") || strings.HasPrefix(s, "-") || strings.Contains(s, "://") {
		return false
	}
	var upper, lower, digit, hex bool
	hex = len(s) >= 32
	for _, c := range s {
		switch {
		case c >= 'A' && c <= 'Z':
			upper = true
		case c >= 'a' && c <= 'z':
			lower = true
		case c >= '0' && c <= '9':
			digit = true
		}
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			hex = false
		}
	}
	return upper && lower && digit || hex
}

// envVarName makes an environment variable name of anything: GitHub Token -> GITHUB_TOKEN.
func envVarName(s string) string {
	n := strings.Trim(notVarChar.ReplaceAllString(strings.ToUpper(s), "_"), "_")
	if n == "" {
		return "VALUE"
	}
	if n[0] >= '0' && n[0] <= '9' {
		n = "_" + n
	}
	return n
}

// headerVar names the variable of a header's secret: <SERVER>_TOKEN for Authorization, else the header
// name, prefixed with the server's unless it already starts with it.
func headerVar(server, header string) string {
	prefix := envVarName(server) + "_"
	switch strings.ToLower(header) {
	case "authorization", "proxy-authorization":
		return prefix + "TOKEN"
	}
	if n := envVarName(header); strings.HasPrefix(n, prefix) {
		return n
	}
	return prefix + envVarName(header)
}

// flagVar names the variable of a flag's secret: --api-key of brave -> BRAVE_API_KEY.
func flagVar(server, flag string) string {
	return envVarName(server) + "_" + envVarName(strings.TrimLeft(flag, "-"))
}

// reserveEnvRefs registers the environment variables the file refers to by name, before any secret is
// named, so that a secret never takes the name of a variable the file already reads.
func (r *reader) reserveEnvRefs(data []byte) {
	for _, m := range envRefRe.FindAllSubmatch(data, -1) {
		name := string(m[1])
		r.variable(name, "env:"+name, false, "", fmt.Sprintf("the environment (the client file reads %s)", m[0]), "", "")
	}
}

// variable returns the name of the variable standing for key, creating it under preferred (or, when
// another key has that name, under <SERVER>_preferred, then with _2, _3...), and records the use.
func (r *reader) variable(preferred, key string, secret bool, input, from, use, server string) string {
	name := preferred
	for n := 2; ; n++ {
		v := r.findVar(name)
		if v == nil {
			if from == "" {
				from = "the environment"
			}
			v = &Var{Name: name, Secret: secret, Input: input, From: from, key: key}
			r.im.Vars = append(r.im.Vars, v)
		}
		if v.key == key {
			if use != "" {
				v.Uses = append(v.Uses, use)
			}
			return name
		}
		switch prefix := envVarName(server) + "_"; {
		case server != "" && !strings.HasPrefix(preferred, prefix) && n == 2:
			name = prefix + preferred
		default:
			name = fmt.Sprintf("%s_%d", preferred, n)
		}
	}
}

func (r *reader) findVar(name string) *Var {
	for _, v := range r.im.Vars {
		if v.Name == name {
			return v
		}
	}
	return nil
}

// dropUnusedVars forgets reserved references no imported value uses.
func (r *reader) dropUnusedVars() {
	kept := r.im.Vars[:0]
	for _, v := range r.im.Vars {
		if len(v.Uses) > 0 {
			kept = append(kept, v)
		}
	}
	r.im.Vars = kept
}

// secretValue maps one value that may be a credential. keyName is what names it (env name, header name,
// flag; "" for none); varName is the variable a secret literal becomes; what says where it was, for the
// operator (env GITHUB_TOKEN, header Authorization, argument 3).
func (r *reader) secretValue(server, use, what, keyName, varName, raw string) string {
	translated := r.value(server, use, raw)
	literal, hasRefs := literalPart(raw)
	scheme, rest := "", literal
	if m := schemeRe.FindStringSubmatch(literal); m != nil && !hasRefs {
		scheme, rest = m[1]+m[2], m[3]
	} else if hasRefs && schemeOnlyRe.MatchString(literal) {
		rest = "" // "Bearer ${input:token}": only the scheme is literal
	}
	secret := rest != "" && (keyName != "" && secretName(keyName) || looksSecret(literal))
	if !secret {
		return r.urlSecrets(server, use, what, translated)
	}
	from := fmt.Sprintf("the value of %s of server %q in %s", what, r.sourceName(server), r.path)
	if hasRefs {
		from += " (the whole value, with the client's variables filled in)"
		scheme = ""
		rest = raw
	}
	name := r.variable(varName, "lit:"+rest, true, "", from, use, server)
	return escapeLiteral(scheme) + "${" + name + "}"
}

// literalPart is raw without its ${...} references, and whether it had any.
func literalPart(raw string) (string, bool) {
	var b strings.Builder
	refs := false
	for i := 0; i < len(raw); {
		if strings.HasPrefix(raw[i:], "${") {
			if end := strings.IndexByte(raw[i:], '}'); end > 0 {
				refs = true
				i += end + 1
				continue
			}
		}
		b.WriteByte(raw[i])
		i++
	}
	return b.String(), refs
}

// urlSecrets replaces, in a value already in toolgate's syntax, the password of a URL
// (postgres://user:pw@host/db) and the values of query parameters named like credentials
// (?api_key=...) with variables.
func (r *reader) urlSecrets(server, use, what, t string) string {
	i := strings.Index(t, "://")
	if i < 0 {
		return t
	}
	from := func(part string) string {
		return fmt.Sprintf("the %s in the URL of %s of server %q in %s", part, what, r.sourceName(server), r.path)
	}
	start := i + 3
	end := len(t)
	if j := strings.IndexAny(t[start:], "/?#"); j >= 0 {
		end = start + j
	}
	if at := strings.LastIndex(t[start:end], "@"); at > 0 {
		userinfo := t[start : start+at]
		if c := strings.IndexByte(userinfo, ':'); c >= 0 && c+1 < len(userinfo) && !strings.Contains(userinfo[c+1:], "$") {
			pw := userinfo[c+1:]
			name := r.variable(envVarName(server)+"_PASSWORD", "lit:"+pw, true, "", from("password"), use, server)
			t = t[:start+c+1] + "${" + name + "}" + t[start+at:]
		}
	}
	q := strings.IndexByte(t, '?')
	if q < 0 {
		return t
	}
	frag := ""
	query := t[q+1:]
	if h := strings.IndexByte(query, '#'); h >= 0 {
		query, frag = query[:h], query[h:]
	}
	params := strings.Split(query, "&")
	for k, p := range params {
		key, val, ok := strings.Cut(p, "=")
		if !ok || val == "" || strings.Contains(val, "$") || !secretName(key) {
			continue
		}
		name := r.variable(envVarName(server+"_"+key), "lit:"+val, true, "", from("parameter "+key), use, server)
		params[k] = key + "=${" + name + "}"
	}
	return t[:q+1] + strings.Join(params, "&") + frag
}

// value translates a client's string into toolgate's syntax: the client's variables become toolgate's
// ${NAME} (recorded in Vars) or what they stand for, and any other ${ becomes a literal $${.
func (r *reader) value(server, use, raw string) string {
	var b strings.Builder
	for i := 0; i < len(raw); {
		if !strings.HasPrefix(raw[i:], "${") {
			b.WriteByte(raw[i])
			i++
			continue
		}
		end := strings.IndexByte(raw[i:], '}')
		if end < 0 {
			b.WriteString("$${")
			i += 2
			continue
		}
		b.WriteString(r.reference(server, use, raw[i+2:i+end]))
		i += end + 1
	}
	return b.String()
}

// reference translates the inside of one ${...}.
func (r *reader) reference(server, use, ref string) string {
	kind, arg, _ := strings.Cut(ref, ":")
	switch {
	case kind == "env" && envNameRe.MatchString(arg):
		return "${" + r.variable(arg, "env:"+arg, false, "", "", use, server) + "}"
	case kind == "input" && arg != "":
		desc := r.im.inputDescription(arg)
		from := fmt.Sprintf("VS Code input %q", arg)
		if desc != "" {
			from += " (" + desc + ")"
		}
		return "${" + r.variable(envVarName(arg), "input:"+arg, true, arg, from, use, server) + "}"
	case ref == "userHome":
		return "${HOME}"
	case ref == "pathSeparator" || ref == "/":
		return string(filepath.Separator)
	case ref == "workspaceFolder" || ref == "workspaceFolderBasename":
		if r.workspace != "" {
			val := r.workspace
			if ref == "workspaceFolderBasename" {
				val = filepath.Base(val)
			}
			r.warn(server, "${%s} is written as %s, the workspace of %s", ref, val, r.path)
			return escapeLiteral(val)
		}
		name := envVarName(ref)
		r.warn(server, "${%s} is read from $%s: %s is not in a .vscode or .cursor folder, so the workspace is unknown", ref, name, r.path)
		return "${" + r.variable(name, "env:"+name, false, "", "the workspace folder the client used", use, server) + "}"
	case envNameRe.MatchString(ref):
		return "${" + r.variable(ref, "env:"+ref, false, "", "", use, server) + "}"
	case strings.Contains(ref, ":-") && envNameRe.MatchString(ref[:strings.Index(ref, ":-")]):
		return "${" + ref + "}" // toolgate's own syntax, with a default: nothing to set
	}
	r.warn(server, "${%s} is a client variable toolgate cannot fill in; it is written literally ($${%s}): replace it by hand", ref, ref)
	return "$${" + ref + "}"
}

// escapeLiteral writes a literal for toolgate, whose ${ starts a variable.
func escapeLiteral(s string) string {
	return strings.ReplaceAll(s, "${", "$${")
}

// sourceName is the client's name of a toolgate server, for messages.
func (r *reader) sourceName(server string) string {
	for _, s := range r.im.Servers {
		if s.Name == server {
			return s.Source
		}
	}
	if src, ok := r.sources[server]; ok {
		return src
	}
	return server
}
