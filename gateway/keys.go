package gateway

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/internal/dirwatch"
)

// Reloading the credentials in the config file (issue 16, item 11).
//
// auth.api_keys, admin.key_sha256 and console.approvers are the parts of toolgate.yaml that change
// while the gateway runs: on SIGHUP (Reload) and when the file changes on disk (Watch), the whole
// file is read again with config.Load, so a reload is held to the same checks and messages as a
// start. When it loads, the policy learns the configured principals (authz.Store.SetPrincipals: a
// new key's principal that only p lines name holds those lines from the next call on, as after a
// restart), the API keys are swapped in authn (one atomic store: a request in flight keeps the set
// it loaded, the next request uses the new one), the approvers in the console (a removed approver's
// sessions, and those begun with a replaced key, end at their next request), and the admin key here
// (the admin API reads it per request). When it does not load, or names as a principal what a g
// line of the policy makes a role (which a start refuses too), nothing changes: the last good keys
// stay in force, and the problems (file:line: key: what was expected) are logged and audited.
//
// Everything else in the file is read once, at New. A reload that finds other settings changed
// applies none of them and logs one warning naming them ("restart to apply"): half a new listener
// or half a new upstream is worse than the old one.
//
// Sessions: an MCP session over HTTP has no credential of its own. Every request carries the
// bearer token and is authenticated again (proxy's authenticate wraps the whole endpoint), so a
// session opened with a key that is then revoked gets 401 on its next request, and nothing it
// sends runs. A listening GET stream it already holds is not cut: it carries notifications only
// (list changes, the progress of calls it started before), ends when the client goes, the session
// idles out (listen.session_idle_ttl) or the gateway stops, and cannot be reopened with the
// revoked key.

// configDebounce is how long the config file must be quiet before a change is reloaded, as for
// the policy files: an editor's save is a burst of events.
const configDebounce = 250 * time.Millisecond

// liveKeys are the admin key in force and the reload counts. reload serialises reloads (SIGHUP and
// the watcher may race); the admin key is an atomic value, so the admin API never waits on a reload
// reading the file.
type liveKeys struct {
	reload   sync.Mutex
	adminKey atomic.Pointer[string] // admin.key_sha256 in force; "" when the admin API takes no key
	statsMu  sync.Mutex
	stats    KeyReloadStats
}

// KeyReloadStats count reloads of the credentials since New.
type KeyReloadStats struct {
	Successes int // the file loaded and its keys are in force (changed or not)
	Failures  int // the file did not load; the last good keys stayed
	LastError string
}

// KeyReloads is what the credential reloads did so far.
func (g *Gateway) KeyReloads() KeyReloadStats {
	g.keys.statsMu.Lock()
	defer g.keys.statsMu.Unlock()
	return g.keys.stats
}

// adminKeySHA256 is the admin key in force.
func (g *Gateway) adminKeySHA256() string {
	if k := g.keys.adminKey.Load(); k != nil {
		return *k
	}
	return ""
}

// ReloadKeys reads the config file again and applies auth.api_keys and admin.key_sha256 from it,
// atomically, or, if the file does not load, keeps the keys in force and returns the problems. See
// the comment at the top of this file.
func (g *Gateway) ReloadKeys() error {
	g.keys.reload.Lock()
	defer g.keys.reload.Unlock()
	file := g.cfg.File
	next, err := config.Load(file)
	if err != nil {
		return g.keysRejected(file, configProblems(err), err)
	}
	// The policy learns the new principals before authn accepts their keys: a name only p lines
	// mention is a principal from now on (a role while no key names it), and a principal that a g
	// line gives as a role refuses the file, as it would refuse a start.
	oldPolicy, newPolicy, err := g.policy.SetPrincipals(PolicyOptions(next).Principals)
	if err != nil {
		err = fmt.Errorf("%s: a principal of auth.api_keys is a role in the policy in force: %w", file, err)
		return g.keysRejected(file, strings.Split(err.Error(), "\n"), err)
	}
	restart := restartFields(g.cfg, next)
	if len(restart) > 0 {
		g.log.Warn("restart to apply: "+strings.Join(restart, ", "), "config", file,
			"why", "only auth.api_keys and admin.key_sha256 are applied without a restart; the other changes are not applied at all")
	}
	approvers, restartConsole := g.reloadApprovers(next)
	if restartConsole {
		restart = append(restart, "console.approvers")
		g.log.Warn("restart to apply: console.approvers", "config", file,
			"why", "the console is served only if approvers were configured at the start")
	}
	change := g.auth.ReplaceAPIKeys(AuthnOptions(next).APIKeys)
	nextAdmin := next.AdminKeySHA256()
	admin := adminKeyChange(g.adminKeySHA256(), nextAdmin)
	g.keys.adminKey.Store(&nextAdmin)
	if newPolicy != oldPolicy && g.server != nil {
		g.server.PolicyChanged(oldPolicy, newPolicy) // tools/list_changed to the sessions whose tools changed
	}
	g.keys.statsMu.Lock()
	g.keys.stats.Successes++
	g.keys.statsMu.Unlock()
	g.metrics.ConfigReload(true)

	msg := "API keys reloaded"
	if change.Unchanged() && admin == "unchanged" {
		msg = "API keys unchanged"
	}
	g.log.Info(msg, "config", file, "keys_before", change.Before, "keys_after", change.After,
		"principals_added", change.Added, "principals_removed", change.Removed, "principals_changed", change.Changed,
		"admin_key", admin, "console_approvers", approvers)
	details := map[string]any{"config": file, "keys_before": change.Before, "keys_after": change.After, "admin_key": admin,
		"console_approvers": approvers}
	for k, v := range map[string][]string{"principals_added": change.Added, "principals_removed": change.Removed,
		"principals_changed": change.Changed, "restart_required": restart} {
		if len(v) > 0 {
			details[k] = v
		}
	}
	g.appendAudit(audit.Record{Kind: audit.KindKeysReload, Decision: audit.DecisionApplied, Details: details})
	return nil
}

// keysRejected records a reload that changed nothing because file could not be applied: counted,
// logged with its problems, audited as rejected. It returns err.
func (g *Gateway) keysRejected(file string, problems []string, err error) error {
	g.keys.statsMu.Lock()
	g.keys.stats.Failures++
	g.keys.stats.LastError = err.Error()
	failures := g.keys.stats.Failures
	g.keys.statsMu.Unlock()
	g.metrics.ConfigReload(false)
	g.log.Error("config reload refused; the last good API keys and admin key stay in force",
		"config", file, "problems", problems, "failures", failures)
	g.appendAudit(audit.Record{Kind: audit.KindKeysReload, Decision: audit.DecisionRejected, Reason: err.Error(),
		Details: map[string]any{"config": file}})
	return err
}

// adminKeyChange says what happened to the admin key, without the key's hash: unchanged, set (there
// was none), changed, or removed (the admin API now refuses every request but /healthz and /readyz).
func adminKeyChange(prev, next string) string {
	switch {
	case prev == next:
		return "unchanged"
	case prev == "":
		return "set"
	case next == "":
		return "removed"
	}
	return "changed"
}

// appendAudit writes r to the audit trail, when there is one; a failure is logged.
func (g *Gateway) appendAudit(r audit.Record) {
	if g.audit == nil {
		return
	}
	if err := g.audit.Append(r); err != nil {
		g.log.Error("audit record not written", "kind", r.Kind, "err", err)
	}
}

// configProblems is one string per problem, for a structured log attribute.
func configProblems(err error) []string {
	var ps *config.Problems
	if errors.As(err, &ps) {
		out := make([]string, len(ps.List))
		for i, p := range ps.List {
			out[i] = p.String()
		}
		return out
	}
	return []string{err.Error()}
}

// watchConfig reloads the keys when the config file changes, until ctx ends; then it returns nil
// with its watcher closed. Like the policy watcher, it watches the file's directory (editors
// replace files by rename; Kubernetes swaps a "..data" symlink) and waits for configDebounce of
// quiet before reloading.
func (g *Gateway) watchConfig(ctx context.Context) error {
	abs, err := filepath.Abs(g.cfg.File)
	if err != nil {
		return err
	}
	w, err := dirwatch.New()
	if err != nil {
		return fmt.Errorf("cannot watch the config file: %w", err)
	}
	defer w.Close()
	dir := filepath.Dir(abs)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("cannot watch directory %s: %w", dir, err)
	}
	names := map[string]bool{abs: true, filepath.Join(dir, "..data"): true}
	g.log.Info("watching the config file for changes to auth.api_keys and admin.key_sha256", "config", abs)
	var quiet <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("the config file watcher stopped")
			}
			if ev.Op != fsnotify.Chmod && names[ev.Name] {
				quiet = time.After(configDebounce)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("the config file watcher stopped")
			}
			g.log.Warn("config file watcher error; a change may have been missed (SIGHUP reloads)", "error", err.Error())
		case <-quiet:
			quiet = nil
			_ = g.ReloadKeys() // logged, counted and audited by ReloadKeys
		}
	}
}

// keysReloadable are the settings ReloadKeys applies; restartFields leaves them out.
var keysReloadable = []string{"auth.api_keys", "admin.key_sha256", "console.approvers"}

// reloadApprovers swaps next's console.approvers into the console (sessions of a removed approver,
// or of a replaced key, end at their next request: console.SetApprovers). It returns how many
// approvers are in force, and true when the console is not served and next asks for it (a restart
// mounts it). Config.Load has checked the approvers, so SetApprovers does not refuse them.
func (g *Gateway) reloadApprovers(next *config.Config) (int, bool) {
	c := g.console.Load()
	if c == nil {
		return 0, len(next.ConsoleApprovers()) > 0
	}
	approvers := ConsoleOptions(next).Approvers
	if err := c.SetApprovers(approvers); err != nil {
		g.log.Error("console approvers not reloaded; the previous ones stay in force", "err", err)
		return len(g.cfg.ConsoleApprovers()), false
	}
	return len(approvers), false
}

// restartFields names the settings that differ between the config in force and next and are not
// applied without a restart: everything but keysReloadable, named as in the file (listen.http,
// mcpServers.orders, rate_limits.roles.viewer), sorted.
func restartFields(cur, next *config.Config) []string {
	out := configDiff(cur, next)
	return slices.DeleteFunc(out, func(k string) bool { return slices.Contains(keysReloadable, k) })
}
