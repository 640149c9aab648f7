package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	vaultredis "github.com/toolgate/toolgate/upstreams/credentials/vault/redisstore"
)

// OpenVault opens the vault of credentials held per user (docs/configuration.md, "Upstream
// credentials"): encrypted with the configured key, in Redis when there is a shared store (so every
// replica acts as each user alike), else in the credentials file.
func OpenVault(cfg *config.Config, store *state.Client) (*vault.Encrypted, error) {
	keys, err := vault.LoadKeyring(cfg.CredentialsKeySource())
	if err != nil {
		return nil, err
	}
	if store != nil {
		return vault.NewEncrypted(vaultredis.New(store), keys), nil
	}
	f, err := vault.OpenFile(cfg.CredentialsPath())
	if err != nil {
		return nil, err
	}
	return vault.NewEncrypted(f, keys), nil
}

// openVault opens the vault when an upstream keeps credentials per user; without one the gateway
// holds none and needs no key.
func (g *Gateway) openVault() error {
	if len(g.cfg.UsesVault()) == 0 {
		return nil
	}
	v, err := OpenVault(g.cfg, g.state)
	if err != nil {
		return err
	}
	if err := g.checkVault(v); err != nil {
		return err
	}
	g.vault = v
	return nil
}

// vaultCheckTimeout bounds the start-up check of the vault (one HSCAN pass and a GET per record in
// Redis; a file is read once).
const vaultCheckTimeout = 10 * time.Second

// checkVault opens every stored credential once: a key that opens none of them is the wrong key, and
// the gateway does not start; a few that do not open (sealed with a key since dropped) are logged. A
// shared store that is down is no reason not to start (the calls that need it answer
// upstream_unavailable until it is back).
func (g *Gateway) checkVault(v *vault.Encrypted) error {
	if g.state != nil && g.state.Err() != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), vaultCheckTimeout)
	defer cancel()
	opened, unopened, err := v.Check(ctx)
	switch {
	case err != nil && g.state != nil:
		g.log.Warn("could not check the stored upstream credentials", "err", err)
		return nil
	case err != nil:
		return err
	case len(unopened) > 0 && opened == 0:
		return fmt.Errorf("the configured credentials key opens none of the %d stored credentials (%s): "+
			"it is not the key they were sealed with; configure that key (after a new one, to rotate)", len(unopened), describeKeySource(g.cfg))
	case len(unopened) > 0:
		g.log.Warn("stored upstream credentials that the configured keys do not open; their users' calls answer upstream_unavailable "+
			"until the key they were sealed with is configured again or they are revoked", "count", len(unopened), "first", unopened[0].String())
	}
	return nil
}

func describeKeySource(cfg *config.Config) string {
	if src := cfg.CredentialsKeySource(); src.File != "" {
		return "key file " + src.File
	}
	return "environment variable " + cfg.CredentialsKeySource().Env
}

// credentialDeps are what the upstreams' credential sources use: the log, the vault (when open), the
// page where a user connects, and the clock.
func (g *Gateway) credentialDeps() CredentialDeps {
	d := CredentialDeps{Log: g.log, ConnectURL: g.connectURL, Now: g.credClock}
	if g.vault != nil {
		d.Vault = g.vault // (a nil *vault.Encrypted in the interface would not be nil)
	}
	return d
}

// Vault is the gateway's vault; nil when no upstream keeps credentials per user.
func (g *Gateway) Vault() *vault.Encrypted { return g.vault }

// credentialsAdmin is the vault's admin API behind the admin key; without a vault, it answers that no
// upstream keeps credentials per user.
func (g *Gateway) credentialsAdmin(key string) http.Handler {
	if g.vault == nil {
		return approvals.RequireAdminKey(key, g.log, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":"no upstream keeps credentials per user (auth mode per_user or oauth)"}` + "\n"))
		}))
	}
	o := VaultAdminOptions(g.cfg, g.log)
	o.OnChange = g.auditCredential
	return approvals.RequireAdminKey(key, g.log, vault.AdminHandler(g.vault, o))
}

// auditCredential records a credential set or revoked through the admin API: who it is for, which
// upstream and kind, from where; never the secret.
func (g *Gateway) auditCredential(action string, e vault.Entry, remote string) {
	g.appendAudit(audit.Record{Kind: audit.KindCredential, Principal: e.Principal, Decision: audit.DecisionApplied,
		Details: map[string]any{"action": action, "upstream": e.Upstream, "credential_kind": string(e.Kind), "via": "admin API", "remote": remote}})
}

// VaultAdminOptions are the vault admin API's view of the config: which upstreams take a secret
// per user, and which keep credentials per user at all.
func VaultAdminOptions(cfg *config.Config, log *slog.Logger) vault.AdminOptions {
	return vault.AdminOptions{
		PerUser: func(upstream string) bool {
			s, ok := cfg.Servers[upstream]
			return ok && s.AuthMode() == config.AuthPerUser
		},
		Known: func(upstream string) bool {
			s, ok := cfg.Servers[upstream]
			return ok && (s.AuthMode() == config.AuthPerUser || s.AuthMode() == config.AuthOAuth)
		},
		Log: log,
	}
}
