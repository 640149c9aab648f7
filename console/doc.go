// Package console is toolgate's web console for the people who approve held calls, served on the
// admin listener at /ui/ when console.approvers is configured (issue 19): approvals, and beside them
// (pages.go) the live calls from the audit trail with what each stage decided (calls.go), the
// upstreams with their tools' pins and an approval of a changed definition (upstreams.go), and the
// audit chain's verification (auditpage.go).
//
// Why a console: the calls policy holds for a human (a lines) are decided today with `toolgate
// approvals` in a terminal, but the people who approve a refund are support supervisors, not
// operators with a shell. The console shows each pending call exactly as it will run (principal,
// tool, the canonical arguments the approval binds to, the policy line that held it, its age and
// expiry) and decides it through the same approvals.Store functions as the admin API, so a decision
// stays bound to that exact call (principal, tool, argument digest, and the version of the rule
// that held it: a request whose rule the policy no longer has is shown without its buttons, and a
// decision posted anyway is refused) and expires at its rule's ttl.
//
// Why it is built this way:
//   - Server-rendered with html/template and embed: no Node build, no JavaScript at all, one CSS
//     file; it works on a phone and is cheap to audit. Everything a request carries (arguments,
//     principal, tool, reasons) is untrusted and reaches the page only through html/template's
//     contextual escaping, never as template.HTML.
//   - Approvers sign in with a key of their own (console.approvers: name and SHA-256 of the key,
//     compared in constant time); decisions are recorded under that name, in the store and in the
//     audit trail. A sign-in creates a server-side session (Sessions) whose id is a random cookie
//     (HttpOnly, SameSite=Strict, Path=/ui/, Secure over TLS or at an https Options.PublicURL, as
//     behind a TLS-terminating proxy); the store keeps only the id's hash, in memory or, with
//     state.redis, in Redis (console/redisstore), so that every replica knows every sign-in. The
//     approvers can be swapped while the gateway runs (SetApprovers, approvers.go):
//     a session whose approver is gone, or was begun with a key since replaced, ends.
//     The session does not care how the approver proved who they are: an OIDC sign-in (oidc.go:
//     authorization code with PKCE against console.oidc's provider, the name from a configured
//     claim, which must be an approver's) calls begin with the name it established.
//   - Who may decide what is policy: the approve action of policy.csv, asked with the approver's
//     name as the principal (and its roles from g lines) and the held call's arguments, so an
//     approve line may carry a condition (amount <= 1000). Nobody decides a request they made.
//   - Every form carries a CSRF token bound to the session (the sign-in form one bound to a
//     pre-session cookie), checked on every POST, on top of SameSite=Strict and an Origin check.
//     Every answer carries a strict Content-Security-Policy, nosniff and no-referrer; nothing
//     under /ui/ is served without a session except the sign-in page and the stylesheet.
//   - Failed sign-ins are limited per remote address, in bounded memory (limiter).
//   - The other pages read what the gateway already has, through Pages: the audit lines the trail
//     keeps in memory (audit.Log.Recent; the page parses them, so what it shows is what the file
//     holds), the upstream set's status, and pins.Store.Approve for a changed tool, which the policy's
//     pin action allows and the gateway writes to the audit trail, as approve does for held calls.
package console
