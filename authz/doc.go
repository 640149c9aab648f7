// Package authz turns identities into principals and answers the policy decision: may this
// subject perform this action on this canonical tool ID, with these arguments?
//
// # Identities
//
// API keys are minted by [NewKey], stored only as SHA-256 hashes, and resolved to a principal by
// [Keys.Principal]. Who asks is a [Subject]: the principal, roles the credential itself grants
// for this request (a JWT roles claim), and attributes conditions may read.
//
// # Decisions
//
// [LoadPolicy] builds an immutable [Policy] from a Casbin model and a CSV policy (by default the
// repository's model.conf and policy.csv: deny-override RBAC with optional argument conditions).
// [Policy.Decide] answers one call, [Policy.Visible] answers "could this subject call it with
// some arguments" (tools/list), [Policy.Explain] says which lines matched and which decided, and
// always agrees with Decide. A [Store] holds the live policy, reloads it ([Store.Reload] on
// SIGHUP, [Store.Watch] on file changes), keeps the last good one on any error and notifies
// subscribers after each swap. [Load] and [Enforcer] are the first API, kept for callers not yet
// moved over.
//
// Roles: a p line applies through the principal's own name, the roles g lines give it, and the
// roles of Subject.Roles (with what those inherit through g lines). Deny overrides allow across
// all of them: a deny reached through any role wins.
//
// # Argument conditions
//
// A p line may end with a condition on the call's arguments, an expr-lang expression
// (https://expr-lang.org) that must be true for the line to apply:
//
//	p, support_agent, orders/refund_order, call, allow, amount <= 100
//	p, support_agent, orders/update_order_status, call, deny, status == 'cancelled'
//	p, viewer, orders/get_order, call, allow, "region in ['eu', 'uk'] && region == principal.region"
//
// A condition names arguments by their bare name (amount) or as args.<name> (for names that
// clash with expr keywords or builtins, or an argument called args or principal); nested fields
// and list items as amount.currency and items[0]. It names the subject as principal.name,
// principal.roles (every role it holds, sorted) and principal.<attribute> (Subject.Attrs; name and
// roles win over attributes of the same name). Strings are single-quoted. No condition means
// always.
//
// Quoting: the line is CSV, read exactly as Casbin's own loader reads it (encoding/csv, spaces
// after a comma dropped). A condition that contains a comma must be wrapped in double quotes,
// and inside them a double quote is written twice; single-quoted strings need no CSV quoting at
// all, so write status == 'shipped', never status == "shipped" (a bare " is a load error). An
// unquoted condition with commas is a load error that shows the quoted form to write.
//
// Evaluation: arguments are decoded with json.Decoder.UseNumber and converted once: a number
// without fraction or exponent that fits int64 becomes int64 (exact, so IDs above 2^53 compare
// exactly); every other number becomes float64 (about 15-17 significant digits:
// 100.000000000000001 reads as 100). expr compares an int64 with a float64 as two float64s. A
// condition that cannot be evaluated (a missing argument or attribute, a wrong type, arguments
// that are not a JSON object) FAILS CLOSED per effect: an allow line does not apply, a deny line
// does. Every field read is strict: plain expr reads a missing field as nil, and nil == nil is
// true, so "region == principal.region" would hold when both are missing; here it fails. JSON
// null is a value (nil), not a missing field.
//
// Bounds: conditions are compiled once, at load, never per call; at most 1024 characters and 256
// syntax nodes; no side effects; no function calls except expr's builtins, without repeat
// (unbounded allocation), now (a decision would depend on the clock) and get (reads a missing
// field as nil); no let, ?. or ??; a condition must be true or false, not a bare value; expr's
// memory budget stops runaway ranges at evaluation (which then fails closed).
//
// # Lint
//
// Loading refuses, naming file:line and what to write instead, and listing EVERY problem: effects
// other than exactly allow/deny; fields with surrounding whitespace; empty fields; "#" in a field
// (an inline comment) outside a condition; "$" in any field; regexMatch patterns (when the model
// uses regexMatch) that do not compile or are not anchored as a whole (^...$); objects that do not
// name a configured server ("<server>/<tool>", "<server>/*"); unknown actions and line types;
// wrong field counts; invalid CSV; conditions that do not compile; role cycles; role chains
// deeper than Casbin's 10 levels. Lines that load but are probably mistakes (a duplicate rule, a
// role no p line names) are [Policy.Warnings].
//
// # Canonical objects
//
// Objects are always canonical catalog IDs "<server>/<tool>", never a client's raw string: the
// model's keyMatch treats everything after "*" as "match anything", "/" and ".." included, so
// "orders/*" matches "orders/../x" and "orders/a/b" too. Enforcing only on IDs that came out of
// the catalog keeps that harmless.
package authz
