// Package config turns toolgate.yaml into one validated, typed Config, so that no other package parses
// configuration, guesses a default, or discovers a bad value at run time.
//
// The file uses the mcpServers shape of Claude Desktop and Cursor (a pasted claude_desktop_config.json is
// valid YAML and loads as is). Loading follows these rules:
//
//   - Every problem in the file is reported, not just the first, each with file, line, key path and what
//     was expected (see Problems).
//   - Unknown keys are errors, so a misspelt limit never silently falls back to its default.
//   - An empty value (`timeout:`) means the same as leaving the key out. Zero values mean "default", and
//     defaults are applied only by the accessors in defaults.go.
//   - ${VAR} and ${VAR:-default} in string values are replaced from the environment; $${ is a literal ${.
//     Expansion runs on decoded values, never on the file text, so a variable cannot add YAML structure.
//     Keys are never expanded. Disabled servers are validated (and expanded) like any other.
//   - Relative paths (cwd, authz.model, authz.policy, auth.jwt.jwks_file, pinning.file, approvals.file,
//     audit.file, and a command containing "/") are relative to the directory of the config file, not to
//     the working directory of the process; use ${HOME} for home. The loader does not open them; their users do, and name the file on failure.
//   - A listener reachable from the network (listen.http not on loopback) must have a credential
//     configured (auth.api_keys or auth.jwt) or an explicit auth.allow_anonymous principal.
//   - Anchors, aliases and merge keys (<<) work as in YAML; explicit keys win over merged ones.
package config
