// Package authz turns identities into principals and answers the policy decision:
// may this principal perform this action on this canonical tool ID?
//
// Identities: API keys are minted by [NewKey], stored only as SHA-256 hashes, and resolved to a
// principal by [Keys.Principal].
//
// Decisions: [Load] builds an [Enforcer] from a Casbin model and a CSV policy (by default the
// repository's model.conf and policy.csv: deny-override RBAC). Load is strict, because a policy
// typo must never open the door: it refuses, naming file and line, any policy line Casbin would
// accept but misread (an effect other than exactly "allow"/"deny", fields with surrounding
// whitespace, empty fields, inline "#" comments, "$" in a field, an unknown action, a wrong
// field count), and it never panics on malformed input.
//
// Objects are always canonical catalog IDs "<server>/<tool>", never a client's raw string:
// the model's keyMatch treats everything after "*" as "match anything", "/" and ".." included,
// so "orders/*" matches "orders/../x" and "orders/a/b" too. Enforcing only on IDs that came out
// of the catalog keeps that harmless.
package authz
