package vault

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// The admin API of the vault, served on the admin listener behind the admin key (the gateway wraps it):
//
//	GET    /v1/credentials[?principal=&upstream=&kind=]   {"credentials": [Entry…]}: never a secret
//	PUT    /v1/credentials/{upstream}/{principal}          body {"secret": "…", "expires": "RFC 3339"}
//	                                                       (expires optional): sets the principal's
//	                                                       per_user secret; the Entry as stored
//	DELETE /v1/credentials/{upstream}/{principal}[?kind=]  revokes the principal's credentials for the
//	                                                       upstream (every kind, or the one named):
//	                                                       {"revoked": [Entry…]}
//
// Errors are {"error": "…"}: 400 for a bad body, secret or kind, 404 for an upstream that keeps no
// credential per user (PUT: no per_user upstream of that name) or nothing to revoke, 503 when the
// store fails (nothing was changed, or nothing is listed: never an empty list). A secret is never
// echoed, logged or put in a message.

// AdminOptions configure the vault's admin API.
type AdminOptions struct {
	// PerUser reports whether upstream is a per_user upstream, whose secret PUT may set.
	PerUser func(upstream string) bool
	// Known reports whether upstream keeps credentials per user (per_user or oauth); DELETE and GET
	// accept only those.
	Known func(upstream string) bool
	Log   *slog.Logger // set and revoke are logged, without secrets
	// OnChange, when set, hears every credential set ("set") or revoked ("revoke") through the API,
	// for the audit trail; never the secret.
	OnChange func(action string, e Entry, remote string)
	Now      func() time.Time // time.Now when nil
}

// ListResponse is the body of GET /v1/credentials.
type ListResponse struct {
	Credentials []EntryJSON `json:"credentials"`
}

// RevokeResponse is the body of DELETE /v1/credentials/{upstream}/{principal}.
type RevokeResponse struct {
	Revoked []EntryJSON `json:"revoked"`
}

// SetRequest is the body of PUT /v1/credentials/{upstream}/{principal}.
type SetRequest struct {
	Secret  string    `json:"secret"`
	Expires time.Time `json:"expires,omitzero"`
}

// EntryJSON is an Entry on the wire.
type EntryJSON struct {
	Principal string    `json:"principal"`
	Upstream  string    `json:"upstream"`
	Kind      Kind      `json:"kind"`
	Updated   time.Time `json:"updated"`
	Expires   time.Time `json:"expires,omitzero"`
	Source    string    `json:"source,omitempty"`
}

func entryJSON(e Entry) EntryJSON {
	return EntryJSON{Principal: e.Principal, Upstream: e.Upstream, Kind: e.Kind, Updated: e.Updated, Expires: e.Expires, Source: e.Source}
}

// Entry is the wire form's Entry.
func (j EntryJSON) Entry() Entry {
	return Entry{Key: Key{Principal: j.Principal, Upstream: j.Upstream, Kind: j.Kind}, Updated: j.Updated, Expires: j.Expires, Source: j.Source}
}

// Kinds are the kinds of stored credential.
var Kinds = []Kind{OAuth, Secret, Registration}

// ParseKind is k when it names a kind.
func ParseKind(k string) (Kind, error) {
	for _, known := range Kinds {
		if string(known) == k {
			return known, nil
		}
	}
	return "", fmt.Errorf("unknown kind %q: expected oauth, secret or registration", k)
}

// MaxPrincipalBytes bounds a principal named in the admin API or the command.
const MaxPrincipalBytes = 256

// CheckPrincipal checks a principal a credential is set for: not empty, bounded, no control
// characters (it is shown in listings and logs).
func CheckPrincipal(p string) error {
	if p == "" || len(p) > MaxPrincipalBytes {
		return fmt.Errorf("expected a principal of 1 to %d bytes", MaxPrincipalBytes)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return errors.New("the principal holds a control character")
		}
	}
	return nil
}

// AdminHandler serves the vault's admin API on s. The caller puts the admin key check in front.
func AdminHandler(s Store, o AdminOptions) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	h := &adminHandler{s: s, o: o}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/credentials", h.list)
	mux.HandleFunc("PUT /v1/credentials/{upstream}/{principal}", h.set)
	mux.HandleFunc("DELETE /v1/credentials/{upstream}/{principal}", h.revoke)
	return mux
}

type adminHandler struct {
	s Store
	o AdminOptions
}

type errorBody struct {
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (h *adminHandler) failed(w http.ResponseWriter, what string, err error) {
	h.o.Log.Error("admin API: credential store", "op", what, "err", err)
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, errorBody{"the credential store failed; nothing was " + what + ", try again"})
}

func (h *adminHandler) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := Filter{Principal: q.Get("principal"), Upstream: q.Get("upstream")}
	if k := q.Get("kind"); k != "" {
		kind, err := ParseKind(k)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
			return
		}
		f.Kind = kind
	}
	list, err := h.s.List(r.Context(), f)
	if err != nil {
		h.failed(w, "listed", err)
		return
	}
	out := ListResponse{Credentials: make([]EntryJSON, 0, len(list))}
	for _, e := range list {
		out.Credentials = append(out.Credentials, entryJSON(e))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *adminHandler) set(w http.ResponseWriter, r *http.Request) {
	upstream, principal := r.PathValue("upstream"), r.PathValue("principal")
	if h.o.PerUser == nil || !h.o.PerUser(upstream) {
		writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no upstream %q with auth mode per_user", upstream)})
		return
	}
	if err := CheckPrincipal(principal); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	var req SetRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		// The decoder's message could quote the body, which holds the secret.
		writeJSON(w, http.StatusBadRequest, errorBody{`expected a JSON body {"secret": "…", "expires": "RFC 3339 time"} (expires optional)`})
		return
	}
	if err := CheckSecret([]byte(req.Secret)); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	now := h.o.Now()
	if !req.Expires.IsZero() && !req.Expires.After(now) {
		writeJSON(w, http.StatusBadRequest, errorBody{"expires is in the past"})
		return
	}
	e := Entry{Key: Key{Principal: principal, Upstream: upstream, Kind: Secret}, Updated: now.UTC(), Expires: req.Expires, Source: "operator"}
	if err := h.s.Put(r.Context(), e, []byte(req.Secret)); err != nil {
		h.failed(w, "stored", err)
		return
	}
	h.o.Log.Info("credential set through the admin API", "principal", principal, "upstream", upstream, "kind", Secret, "remote", r.RemoteAddr)
	h.changed("set", e, r.RemoteAddr)
	writeJSON(w, http.StatusOK, entryJSON(e))
}

func (h *adminHandler) revoke(w http.ResponseWriter, r *http.Request) {
	upstream, principal := r.PathValue("upstream"), r.PathValue("principal")
	if h.o.Known == nil || !h.o.Known(upstream) {
		writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no upstream %q that keeps credentials per user (auth mode per_user or oauth)", upstream)})
		return
	}
	if err := CheckPrincipal(principal); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	f := Filter{Principal: principal, Upstream: upstream}
	if k := r.URL.Query().Get("kind"); k != "" {
		kind, err := ParseKind(k)
		if err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
			return
		}
		f.Kind = kind
	}
	revoked, err := Revoke(r.Context(), h.s, f)
	if err != nil {
		h.failed(w, "revoked", err)
		return
	}
	if len(revoked) == 0 {
		writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no credential of %q is stored for %q", principal, upstream)})
		return
	}
	out := RevokeResponse{Revoked: make([]EntryJSON, 0, len(revoked))}
	for _, e := range revoked {
		out.Revoked = append(out.Revoked, entryJSON(e))
		h.o.Log.Info("credential revoked through the admin API", "principal", e.Principal, "upstream", e.Upstream, "kind", e.Kind, "remote", r.RemoteAddr)
		h.changed("revoke", e, r.RemoteAddr)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *adminHandler) changed(action string, e Entry, remote string) {
	if h.o.OnChange != nil {
		h.o.OnChange(action, e, remote)
	}
}
