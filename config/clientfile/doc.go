// Package clientfile reads the MCP server lists that clients keep (Claude Desktop's
// claude_desktop_config.json, Cursor's mcp.json, VS Code's mcp.json and the "mcp" section of its
// settings.json) and maps them onto toolgate's mcpServers, for `toolgate import`.
//
// It exists because a client's file is close to toolgate.yaml but is not one: it has keys toolgate does
// not know (preferences, inputs, envFile), VS Code writes JSONC and calls the list "servers", the clients
// have ${...} variables of their own, and the files hold credentials in plain text. Pasting such a file
// as toolgate.yaml fails, or worse, works and copies the credentials along. This package turns one into
// what toolgate needs, says what it could not carry over, and keeps secrets out of what it writes. It
// depends on nothing of the gateway: it produces text (toolgate.yaml, policy.csv, the client snippet)
// and the command writes it.
//
// Decisions:
//
//   - Secrets. A value is a secret when its key names a credential (an env name or header name that
//     contains TOKEN, KEY, SECRET, PASSWORD, PASSWD, AUTH, CREDENTIAL or COOKIE; an argument after a
//     flag named so), when it has the shape of one (a known token prefix such as ghp_ or sk-, a JWT, a
//     long random-looking string), or when it is the password of a URL. A secret literal is never
//     written: it becomes a ${NAME} reference, which toolgate expands from its environment at start, and
//     NAME is listed in Import.Vars for the operator to set. VS Code's ${input:id} becomes ${ID} the same
//     way, and ${env:NAME} becomes ${NAME}.
//   - Other env values (paths, modes, URLs without credentials) are copied as they are. They are the
//     configuration the server needs, the client kept them in plain text already, and moving every one
//     of them into the environment would make the gateway harder to start for nothing.
//   - A server name toolgate would refuse is normalized (characters outside A-Z a-z 0-9 _ - become -,
//     "__" becomes "_", at most 64 characters), with a warning; two names that normalize alike are an
//     error, since renaming one silently would change the tool names a user knows.
//   - Anything toolgate cannot express (envFile, autoApprove, an unknown type or field, a client
//     variable it has no value for) is a warning, in the output and as a comment in toolgate.yaml, never
//     dropped in silence.
package clientfile
