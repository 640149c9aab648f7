// Package authz answers the policy decision: may this subject perform this action on this
// canonical tool ID, with these arguments?
//
// # Subjects
//
// Who asks is a [Subject]: the principal, roles the credential itself grants for this request (a
// JWT roles claim), and attributes conditions may read. Package authn builds it from the request's
// credential (and mints and resolves API keys); this package never sees a credential.
//
// # Decisions
//
// [LoadPolicy] builds an immutable [Policy] from a Casbin model and a CSV policy (the
// repository's model.conf, the only model accepted up to spacing and the order of its parts,
// and a policy.csv: deny-override RBAC with optional argument conditions).
// [Policy.Decide] answers one call, [Policy.Visible] answers "could this subject call it with
// some arguments" (tools/list), [Policy.Trace] lists how every matching line came out, line by
// line (package authz/explain reads it for `toolgate explain`, and agrees with Decide). A [Store] holds the live policy, reloads it ([Store.Reload] on
// SIGHUP, [Store.Watch] on file changes), keeps the last good one on any error and notifies
// subscribers after each swap.
//
// Roles: a p line applies through the principal's own name, the roles g lines give it, and the
// roles of Subject.Roles (with what those inherit through g lines). Deny overrides allow across
// all of them: a deny reached through any role wins.
//
// Principals and roles share one namespace in Casbin (g(x, x) is true), so the policy separates
// them ([Policy.IsRole]): a principal is a name on the left of a g line and never on the right
// of one, or one of Options.Principals (the configuration's API-key, stdio and anonymous
// principals); a role is every other name the policy mentions (a g line's right side, a p line's
// subject). A Subject.Principal that is a role is denied ([ErrPrincipalIsRole], for the log): a
// JWT with sub "supervisor" must not hold the supervisor lines. Subject.Roles values that are
// not roles (a principal's name, an unknown name) are dropped ([Explanation.DroppedRoles]): a
// roles claim ["carol"] must not give carol's roles. A role that only conditions test
// ('lead' in principal.roles) must be named by a line of the policy too.
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
// 100.000000000000001 reads as 100). An int64 and a float64 compare as two float64s. A
// condition that cannot be evaluated (a missing argument or attribute, a wrong type, an
// overflow, arguments that are not a JSON object) FAILS CLOSED per effect: an allow line does
// not apply, a deny line does. Every field read is strict: plain expr reads a missing field as
// nil, and nil == nil is true, so "region == principal.region" would hold when both are missing;
// here it fails. JSON null is a value (nil), not a missing field.
//
// Every operator is strict too (strict.go): == != < <= > >= in contains startsWith endsWith
// matches are errors, not false, when the operands' kinds differ (a number with a number, an
// int64 with a float64 included, a string with a string, a boolean with a boolean), when either
// is null (null == null included; test for null with type(x) == 'nil', and a comparison with the
// nil literal is refused at load), or a list or an object (except x in list, whose items must all
// be of x's kind, and 'key' in object). So "deny, status == 'cancelled'" applies to
// status ["cancelled"] and to null, and "allow, region != 'us'" does not allow region ["us"].
// contains is substring only; membership is in. Arithmetic (+ - * / % ** and unary -, abs,
// int()) is checked: an int64 overflow, an infinite or NaN float, a division by zero are
// errors (quantity * price <= 1000 does not hold for a quantity that wraps). all, any, none,
// filter, map, count, reduce and the other predicates need a list.
//
// Bounds: conditions are compiled once, at load, never per call; at most 1024 characters and 256
// syntax nodes; no side effects; no function calls except expr's builtins, without repeat
// (unbounded allocation), now (a decision would depend on the clock), get (reads a missing field
// as nil), sum and the bit functions (they wrap around on overflow; write reduce(list, #acc + #,
// 0)); no let, ?. or ??; a condition must be true or false, not a bare value; expr's memory
// budget stops runaway ranges at evaluation (which then fails closed).
//
// Visibility: [Policy.Visible] evaluates what a condition reads of the principal and assumes
// the arguments can go either way (visible.go), so "allow, region == principal.region" lists
// the tool only for principals with a region attribute; a tool it hides is never allowed.
//
// # Approvals
//
// An "a" line in policy.csv marks calls that need a human approval before they run:
//
//	a, support_agent, orders/refund_order, call, amount > 50
//	a, <role or principal>, <server>/<tool>, call[, <condition>]
//
// Its fields mean what the same fields of a p line mean, and are matched the same way: the
// subject through the principal's name, its g-line roles and the credential's accepted roles
// (same principal/role namespace rules; an a line's subject counts for [Policy.IsRole] like a p
// line's); the object by keyMatch (regexMatch if the model uses it) on the canonical ID; the
// action by equality; the condition with the same strict evaluation. A condition that cannot be
// evaluated FAILS CLOSED: approval is needed. [Policy.ApprovalRule] names the first matching a
// line ("file:line"); it only matters for a call [Policy.Decide] allowed (an approval never
// turns a deny into an allow). [Policy.Trace] lists the matching a lines ([Trace.ApprovalLines]),
// from which `toolgate explain` says "allowed by X, but needs approval (Y)".
//
// Why a lines are outside Casbin and model.conf: an approval is not an effect. Deny-override
// combines allow and deny into one boolean; a third outcome ("allowed, but ask first") would
// need a custom effector and a different policy_effect, and any change to the model's matcher
// or effect is exactly what the model check refuses (it could open access). Casbin's loader also
// refuses a line type the model has no section for ("missing required section a"). So
// [LoadPolicy] lints a lines exactly like p lines, keeps them out of the lines its adapter hands
// to Casbin, and evaluates them itself, reusing the p-line role resolution, object match and
// compiled conditions. The allow/deny decision is untouched by them.
//
// # Scopes
//
// An "s" line names an OAuth scope a request needs (scopes.go):
//
//	s, orders/refund_order, call, orders:write
//	s, <server>/<tool>, call|read|get, <scope>
//
// [Policy.CheckScopes] gives every scope the matching s lines name (object by keyMatch or
// regexMatch, action by equality, no subject: a scope limits whoever holds the token) and those
// the subject's token lacks. Only a [Subject] whose credential carries scopes (Subject.Scoped, a
// JWT) is limited; API keys, stdio and anonymous callers are not. Like a lines, s lines are kept
// out of Casbin: a missing scope is not a denial (the gateway answers it with a challenge the
// client can act on), so it is not an effect deny-override could combine, and [Policy.Decide] and
// [Policy.Visible] never read them.
//
// # Load-time checks
//
// Loading refuses, naming file:line and what to write instead, and listing EVERY problem: a
// policy file whose last line has no newline (a file cut while being saved: "..., allow,
// amount <= 100" cut before ", amount" is an unconditional allow); a policy without p lines;
// effects other than exactly allow/deny; fields with surrounding whitespace; empty fields; "#"
// in a field (an inline comment) outside a condition; "$" in any field; regexMatch patterns (when
// the model uses regexMatch) that do not compile or are not anchored as a whole (^...$); objects
// that do not name a configured server ("<server>/<tool>", "<server>/*"); unknown actions and
// line types; wrong field counts; invalid CSV; conditions that do not compile; role cycles; role
// chains deeper than Casbin's 10 levels; a configured principal given as a role. The field
// checks apply to a lines exactly as to p lines (an a line with an effect is refused). In the model:
// anything but r = sub, obj, act, args; p = sub, obj, act, eft, cond; g = _, _; deny-override;
// and the matcher (g(r.sub, p.sub) || hasRole(r.args, p.sub)) && keyMatch(r.obj, p.obj) &&
// r.act == p.act && cond(r.args, p.cond, p.eft), its parts in any order, keyMatch or regexMatch.
// Files that change while they are read are refused. [LoadPolicy] applies all of it, so
// `toolgate check` passes exactly what the [Store] loads. Lines that load but are probably
// mistakes (a duplicate rule, a role no p line names) are [Policy.Warnings]; the Store logs them
// on every load.
//
// These checks (lint.go, model.go, policyfile.go) are part of loading, not tooling, and so they
// live here rather than in a linting package beside authz: the gateway runs them at startup (a
// policy they refuse stops it) and on every reload (a policy they refuse is not swapped in), the
// pass that runs them also parses the lines, compiles the conditions and finds the roles that
// decisions use, and a separate copy for `toolgate check` could drift from what the gateway
// enforces. strict.go is not a check either: it is how conditions compare values, on every call.
// The part of the policy tooling that the gateway never runs, explaining a decision to a person,
// is package authz/explain.
//
// # Canonical objects
//
// Objects are always canonical catalog IDs "<server>/<tool>", never a client's raw string: the
// model's keyMatch treats everything after "*" as "match anything", "/" and ".." included, so
// "orders/*" matches "orders/../x" and "orders/a/b" too. Enforcing only on IDs that came out of
// the catalog keeps that harmless.
package authz
