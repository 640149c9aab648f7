package vault_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/upstreams/credentials/vault"
	"github.com/toolgate/toolgate/upstreams/credentials/vault/vaulttest"
)

func TestMemoryBackend(t *testing.T) { vaulttest.Backend(t, &vault.Memory{}) }

func TestFileBackend(t *testing.T) {
	f, err := vault.OpenFile(filepath.Join(t.TempDir(), "toolgate.credentials.json"))
	if err != nil {
		t.Fatal(err)
	}
	vaulttest.Backend(t, f)
}

func openEncryptedFile(t *testing.T, path string) *vault.Encrypted {
	t.Helper()
	key, _ := vault.NewKey()
	keys, err := vault.LoadKeyring(vault.KeySource{Env: "K", LookupEnv: func(string) (string, bool) { return key, true }})
	if err != nil {
		t.Fatal(err)
	}
	f, err := vault.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return vault.NewEncrypted(f, keys)
}

// TestFileIsPrivateAndSealed: the file and its lock are mode 0600, hold the entry in clear and the
// secret only sealed.
func TestFileIsPrivateAndSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.credentials.json")
	s := openEncryptedFile(t, path)
	if err := s.Put(context.Background(), vault.Entry{Key: vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}, Source: "operator"},
		[]byte("alice-very-secret-key")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + ".lock"} {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", p, err, st.Mode().Perm())
		}
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), "very-secret") {
		t.Fatal("the secret is in the file in clear")
	}
	if !strings.Contains(string(data), `"principal": "alice"`) || !strings.Contains(string(data), `"sealed": "`) {
		t.Fatalf("the file does not hold the entry and its sealed data:\n%s", data)
	}
}

// TestFileWriteIsAtomic: a crash between writing the new file and renaming it leaves the old file
// whole (and the next write cleans the leftover up).
func TestFileWriteIsAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.credentials.json")
	s := openEncryptedFile(t, path)
	ctx := context.Background()
	alice := vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}
	if err := s.Put(ctx, vault.Entry{Key: alice}, []byte("one")); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	// A leftover like a crashed writer's: the next write removes it.
	leftover := filepath.Join(dir, ".toolgate.credentials.json.tmp-123")
	if err := os.WriteFile(leftover, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, vault.Entry{Key: vault.Key{Principal: "bob", Upstream: "orders", Kind: vault.Secret}}, []byte("two")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the crashed writer's temporary file was not cleaned up")
	}
	after, _ := os.ReadFile(path)
	if string(before) == string(after) {
		t.Fatal("the second write changed nothing")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("a temporary file is left: %s", e.Name())
		}
	}
}

// TestFileWritersDoNotLoseEachOthersWrites: two stores on one file (the gateway and the command)
// writing at once keep every record: each write re-reads the file under the lock.
func TestFileWritersDoNotLoseEachOthersWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.credentials.json")
	a, b := openEncryptedFile(t, path), openEncryptedFile(t, path)
	var wg sync.WaitGroup
	for i, s := range []*vault.Encrypted{a, b} {
		wg.Go(func() {
			for n := range 20 {
				k := vault.Key{Principal: string(rune('a'+i)) + string(rune('a'+n)), Upstream: "orders", Kind: vault.Secret}
				if err := s.Put(context.Background(), vault.Entry{Key: k}, []byte("x")); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if l, err := a.List(context.Background(), vault.Filter{}); err != nil || len(l) != 40 {
		t.Fatalf("%d records after 40 writes by two stores: %v", len(l), err)
	}
}

// TestFileSeesAnotherWritersChanges: a store reads what another store on the file wrote (and
// revoked) at its next Get, with no restart.
func TestFileSeesAnotherWritersChanges(t *testing.T) {
	path := filepath.Join(t.TempDir(), "toolgate.credentials.json")
	key, _ := vault.NewKey()
	keys, _ := vault.LoadKeyring(vault.KeySource{Env: "K", LookupEnv: func(string) (string, bool) { return key, true }})
	f1, _ := vault.OpenFile(path)
	f2, _ := vault.OpenFile(path)
	gw, cli := vault.NewEncrypted(f1, keys), vault.NewEncrypted(f2, keys)
	ctx := context.Background()
	alice := vault.Key{Principal: "alice", Upstream: "orders", Kind: vault.Secret}
	if _, _, err := gw.Get(ctx, alice); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("before: %v", err)
	}
	for _, secret := range []string{"first", "second-of-the-same-size"[:6]} {
		if err := cli.Put(ctx, vault.Entry{Key: alice}, []byte(secret)); err != nil {
			t.Fatal(err)
		}
		if got, _, err := gw.Get(ctx, alice); err != nil || string(got) != secret {
			t.Fatalf("the gateway read %q, %v; want %q", got, err, secret)
		}
	}
	if err := cli.Delete(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gw.Get(ctx, alice); !errors.Is(err, vault.ErrNotFound) {
		t.Fatalf("after revoke: %v, want ErrNotFound", err)
	}
}

func TestFileRefusesWhatItCannotTrust(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "toolgate.credentials.json")
	if err := os.WriteFile(path, []byte(`{"version": 1, "credentials": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := vault.OpenFile(path); err == nil || !strings.Contains(err.Error(), "mode 0644 lets other users read it; expected 0600") {
		t.Fatalf("a world-readable file: %v", err)
	}
	if _, err := vault.OpenFile(filepath.Join(dir, "missing", "creds.json")); err == nil || !strings.Contains(err.Error(), "its directory "+filepath.Join(dir, "missing")+" does not exist") {
		t.Errorf("a file in a missing directory: %v", err)
	}
	for _, c := range []struct{ content, want string }{
		{`{"version": 1, "credentials": [`, "unexpected EOF"},
		{`{"version": 2, "credentials": []}`, "version 2, expected 1"},
		{`{"version": 1, "credentials": [{"principal": "a", "upstream": "o", "kind": "secret"}]}`, "credentials[0]: no sealed data"},
		{`{"version": 1, "credentials": [], "extra": 1}`, "unknown field"},
	} {
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := vault.OpenFile(path)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "never treats a damaged credentials file as empty") {
			t.Errorf("%s: %v, want %q", c.content, err, c.want)
		}
	}
}
