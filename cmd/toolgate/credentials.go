package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/state"
	"github.com/toolgate/toolgate/upstreams/credentials/vault"
)

const credentialsUsage = `usage:
  toolgate credentials list [--upstream U] [--principal P] [--kind K]   what the vault holds (never a secret)
  toolgate credentials set <upstream> <principal> [--expires 720h]       a per_user secret, read from stdin
  toolgate credentials revoke <upstream> <principal> [--kind K]          delete the principal's credentials there
  toolgate credentials rekey                                             re-seal everything with the first key
  toolgate credentials newkey                                            print a new random key
flags:
  --config FILE   the gateway's configuration (default toolgate.yaml): the vault (credentials.file, or
                  Redis with state.redis) and its key (TOOLGATE_CREDENTIALS_KEY, credentials.key_env or
                  credentials.key_file) are the gateway's own`

// runCredentials manages the vault of credentials held per user, on the store itself (as the
// gateway reads it at every call), so it works whether or not the gateway runs.
func runCredentials(args []string) int {
	return credentialsCommand(args, os.Stdin, os.Stdout, os.Stderr, time.Now)
}

func credentialsCommand(args []string, in io.Reader, out, errOut io.Writer, now func() time.Time) int {
	cmds := map[string]int{"list": 0, "set": 2, "revoke": 2, "rekey": 0, "newkey": 0}
	wantPos, ok := 0, false
	if len(args) > 0 {
		wantPos, ok = cmds[args[0]]
	}
	if !ok {
		fmt.Fprintln(errOut, credentialsUsage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet("credentials "+cmd, flag.ContinueOnError)
	fs.SetOutput(errOut)
	configPath := fs.String("config", "toolgate.yaml", "the gateway's configuration")
	upstream := fs.String("upstream", "", "list: only this upstream")
	principal := fs.String("principal", "", "list: only this principal")
	kind := fs.String("kind", "", "list, revoke: only this kind (secret, oauth, registration)")
	expires := fs.Duration("expires", 0, "set: the secret stops being used after this long (default: never)")
	pos, err := parseInterleaved(fs, args[1:])
	if err != nil {
		return 2
	}
	if len(pos) != wantPos {
		fmt.Fprintln(errOut, credentialsUsage)
		return 2
	}
	if cmd == "newkey" {
		key, err := vault.NewKey()
		if err != nil {
			fmt.Fprintln(errOut, "toolgate credentials:", err)
			return 1
		}
		fmt.Fprintln(out, key)
		return 0
	}
	var k vault.Kind
	if *kind != "" {
		if k, err = vault.ParseKind(*kind); err != nil {
			fmt.Fprintln(errOut, "toolgate credentials:", err)
			return 2
		}
	}
	cfg, err := config.Load(*configPath)
	if err != nil {
		printProblems(errOut, "invalid configuration", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, closeStore, err := openCredentialStore(ctx, cfg)
	if err != nil {
		fmt.Fprintln(errOut, "toolgate credentials:", err)
		return 1
	}
	defer closeStore()
	c := credentialsCmd{cfg: cfg, store: store, out: out, errOut: errOut, now: now}
	switch cmd {
	case "list":
		return c.list(ctx, vault.Filter{Upstream: *upstream, Principal: *principal, Kind: k})
	case "set":
		return c.set(ctx, pos[0], pos[1], in, *expires)
	case "revoke":
		return c.revoke(ctx, vault.Filter{Upstream: pos[0], Principal: pos[1], Kind: k})
	default:
		return c.rekey(ctx)
	}
}

// openCredentialStore opens the vault the gateway of cfg uses: in Redis with state.redis (waiting for
// the first answer), else the credentials file.
func openCredentialStore(ctx context.Context, cfg *config.Config) (*vault.Encrypted, func(), error) {
	if !cfg.StateShared() {
		v, err := gateway.OpenVault(cfg, nil)
		return v, func() {}, err
	}
	sc, err := state.Open(state.Options{URL: cfg.StateRedisURL(), KeyPrefix: cfg.StateKeyPrefix(),
		DialTimeout: cfg.StateDialTimeout(), OpTimeout: cfg.StateOpTimeout()})
	if err != nil {
		return nil, nil, err
	}
	if !sc.WaitUp(ctx, sc.ConnectTimeout()+5*time.Second) {
		sc.Close()
		return nil, nil, errors.New("the shared state store (state.redis), where the credentials are kept, does not answer")
	}
	v, err := gateway.OpenVault(cfg, sc)
	if err != nil {
		sc.Close()
		return nil, nil, err
	}
	return v, sc.Close, nil
}

type credentialsCmd struct {
	cfg    *config.Config
	store  *vault.Encrypted
	out    io.Writer
	errOut io.Writer
	now    func() time.Time
}

func (c credentialsCmd) fail(err error) int {
	fmt.Fprintln(c.errOut, "toolgate credentials:", err)
	return 1
}

func (c credentialsCmd) list(ctx context.Context, f vault.Filter) int {
	list, err := c.store.List(ctx, f)
	if err != nil {
		return c.fail(err)
	}
	if len(list) == 0 {
		fmt.Fprintln(c.out, "no credentials stored")
		return 0
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPSTREAM\tPRINCIPAL\tKIND\tSOURCE\tUPDATED\tEXPIRES")
	for _, e := range list {
		expires := "-"
		if !e.Expires.IsZero() {
			expires = e.Expires.UTC().Format(time.RFC3339)
			if !e.Expires.After(c.now()) {
				expires += " (expired)"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", terminalSafe(e.Upstream), terminalSafe(e.Principal), e.Kind,
			terminalSafe(cmp.Or(e.Source, "-")), e.Updated.UTC().Format(time.RFC3339), expires)
	}
	_ = tw.Flush()
	return 0
}

// set stores a per_user secret read from stdin: never from the command line, which other users of
// the host see in ps and which shells keep in their history.
func (c credentialsCmd) set(ctx context.Context, upstream, principal string, in io.Reader, expires time.Duration) int {
	s, ok := c.cfg.Servers[upstream]
	if !ok || s.AuthMode() != config.AuthPerUser {
		fmt.Fprintf(c.errOut, "toolgate credentials: %s has no upstream %q with auth mode per_user\n", c.cfg.File, upstream)
		return 2
	}
	if err := vault.CheckPrincipal(principal); err != nil {
		return c.fail(err)
	}
	if f, ok := in.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(c.errOut, "toolgate credentials: the secret is read from stdin, and stdin is a terminal, where it would show; "+
			"pipe it in instead, such as: printf %s \"$SECRET\" | toolgate credentials set "+upstream+" "+principal)
		return 2
	}
	secret, err := readSecret(in)
	if err != nil {
		return c.fail(err)
	}
	now := c.now().UTC()
	e := vault.Entry{Key: vault.Key{Principal: principal, Upstream: upstream, Kind: vault.Secret}, Updated: now, Source: "operator"}
	if expires < 0 {
		fmt.Fprintln(c.errOut, "toolgate credentials: --expires must be positive")
		return 2
	}
	if expires > 0 {
		e.Expires = now.Add(expires)
	}
	if err := c.store.Put(ctx, e, secret); err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "stored %s's secret for %s (%d bytes, encrypted)\n", terminalSafe(principal), upstream, len(secret))
	return 0
}

// readSecret reads the secret: all of stdin, less one trailing newline (echo adds one), checked.
func readSecret(in io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(in, vault.MaxSecretBytes+3))
	if err != nil {
		return nil, fmt.Errorf("reading the secret from stdin: %w", err)
	}
	data = []byte(strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r"))
	if err := vault.CheckSecret(data); err != nil {
		return nil, fmt.Errorf("the secret on stdin: %w", err)
	}
	return data, nil
}

func (c credentialsCmd) revoke(ctx context.Context, f vault.Filter) int {
	if err := vault.CheckPrincipal(f.Principal); err != nil {
		return c.fail(err)
	}
	revoked, err := vault.Revoke(ctx, c.store, f)
	if err != nil {
		return c.fail(err)
	}
	if len(revoked) == 0 {
		fmt.Fprintf(c.errOut, "toolgate credentials: no credential of %q is stored for %q\n", terminalSafe(f.Principal), terminalSafe(f.Upstream))
		return 1
	}
	for _, e := range revoked {
		fmt.Fprintf(c.out, "revoked %s's %s credential for %s\n", terminalSafe(e.Principal), e.Kind, terminalSafe(e.Upstream))
	}
	return 0
}

func (c credentialsCmd) rekey(ctx context.Context) int {
	rep, err := c.store.Rekey(ctx)
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprintf(c.out, "re-sealed %d credentials with the first key; %d already were; %d changed meanwhile (stored with it)\n",
		rep.Resealed, rep.Current, rep.Changed)
	if len(rep.Unopened) > 0 {
		fmt.Fprintf(c.errOut, "toolgate credentials: %d credentials were sealed with a key that is not configured, and were left as they are:\n", len(rep.Unopened))
		for _, k := range rep.Unopened {
			fmt.Fprintf(c.errOut, "  %s\n", terminalSafe(k.String()))
		}
		fmt.Fprintln(c.errOut, "add the key they were sealed with (after the first) and run rekey again, or revoke them")
		return 1
	}
	fmt.Fprintln(c.out, "every credential is sealed with the first key: the others can be removed")
	return 0
}
