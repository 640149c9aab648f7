// Package pins protects against "rug pulls": an upstream MCP server that
// changes a tool's definition after it was trusted (a new description that
// instructs the model, a schema that asks for more, an annotation that now
// claims read-only). It records a canonical hash of every tool's definition
// in a lock file and tells the catalog whether each listed tool still
// matches.
//
// # What is pinned
//
// A Definition is the tool's upstream name, title, description, input and
// output schema and annotations. Its hash is SHA-256 over canonical JSON
// (Definition.Canonical): keys sorted, no whitespace, numbers by exact
// value (never through float64), so reordering keys or reformatting a
// schema does not change the hash, and any change to what a model or the
// validator reads does.
//
// # Modes
//
//   - tofu (default): a tool seen for the first time is recorded; one whose
//     definition later differs from its pin is Changed.
//   - strict: a tool without a pin is Pending until approved; a differing
//     one is Changed.
//   - off: nothing is pinned or checked.
//
// Pending and Changed tools are not callable: the catalog hides them from
// tools/list and answers tool_changed until an admin reviews the change
// (Diff) and approves it (Store.Approve; `toolgate pins diff`, `toolgate pins
// approve <tool>|--all`).
//
// # The lock file
//
// toolgate.pins.json beside the config file (config key pinning.file),
// human-readable and sorted:
//
//	{
//	  "version": 1,
//	  "tools": {
//	    "orders/get_order": {
//	      "hash": "sha256:…",
//	      "approved_at": "2025-06-01T12:00:00Z",
//	      "definition": {"annotations": null, "description": "…", "inputSchema": {…}, "name": "get_order", "outputSchema": null, "title": ""}
//	    }
//	  }
//	}
//
// The definition is kept so that a diff can be shown offline. On load each
// entry's hash is recomputed from its definition; a mismatch, a duplicate
// key, an unknown field, an empty or truncated file is an error naming the
// file, never an empty set of pins (which would trust every tool again). A
// missing file is an empty set (first run).
//
// Writes are atomic (temporary file, fsync, rename, fsync of the
// directory), so a crash leaves the old file or the new one. The running
// gateway and `toolgate pins approve` may both write: every write takes an
// flock on <file>.lock, re-reads the file and merges, so neither loses the
// other's pins; the gateway picks up an approval by Reload (Watch does it
// on every change of the file).
package pins
