package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"
)

// approverSet is the approvers in force, decoded once: the console swaps the whole set atomically
// (SetApprovers), so a request reads one consistent set.
type approverSet struct {
	list   []Approver
	hashes [][]byte // the approvers' key hashes, decoded, by position; nil: signs in through OIDC only
}

func newApproverSet(approvers []Approver, oidc bool) (*approverSet, error) {
	set := &approverSet{list: append([]Approver(nil), approvers...)}
	for _, a := range approvers {
		if a.KeySHA256 == "" && a.Name != "" && oidc {
			set.hashes = append(set.hashes, nil)
			continue
		}
		h, err := hex.DecodeString(strings.ToLower(a.KeySHA256))
		if err != nil || len(h) != sha256.Size || a.Name == "" {
			return nil, fmt.Errorf("console: approver %q: expected a name and the 64 hex characters of a SHA-256", a.Name)
		}
		set.hashes = append(set.hashes, h)
	}
	return set, nil
}

// match finds the approver whose key hashes to key's SHA-256, comparing with every approver in
// constant time; it returns the approver's name and the fingerprint of their key (keyID).
func (s *approverSet) match(key string) (name, id string, ok bool) {
	if key == "" {
		return "", "", false
	}
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i, h := range s.hashes {
		if subtle.ConstantTimeCompare(sum[:], h) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", "", false
	}
	return s.list[found].Name, keyID(s.hashes[found]), true
}

// keyID fingerprints an approver's key hash for their sessions: the first 8 bytes of a SHA-256 over
// it, so a session stored in Redis holds nothing that helps to sign in, yet ends when the key is
// replaced.
func keyID(hash []byte) string {
	sum := sha256.Sum256(append([]byte("toolgate console key\x00"), hash...))
	return hex.EncodeToString(sum[:8])
}

// holds reports whether s still lets the session's approver in: they are still an approver, and a
// session begun with a key was begun with the key they hold now. So removing an approver, or
// replacing their key (a leaked one, say), ends their sessions at their next request, on every
// replica that has reloaded.
func (s *approverSet) holds(sess *Session) bool {
	for i, a := range s.list {
		if a.Name != sess.Approver {
			continue
		}
		if sess.Method != "key" {
			return true
		}
		return s.hashes[i] != nil && subtle.ConstantTimeCompare([]byte(keyID(s.hashes[i])), []byte(sess.KeyID)) == 1
	}
	return false
}

func (s *approverSet) has(name string) bool {
	for _, a := range s.list {
		if a.Name == name {
			return true
		}
	}
	return false
}

func (s *approverSet) anyKey() bool {
	for _, h := range s.hashes {
		if h != nil {
			return true
		}
	}
	return false
}

// SetApprovers replaces the approvers (a reload of console.approvers): sign-in checks the new set at
// once, and a session whose approver is gone, or whose key was replaced, ends at its next request.
// The set is refused whole, changing nothing, if an approver is malformed.
func (c *Console) SetApprovers(approvers []Approver) error {
	set, err := newApproverSet(approvers, c.o.OIDC != nil)
	if err != nil {
		return err
	}
	c.approvers.Store(set)
	return nil
}
