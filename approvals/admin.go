package approvals

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxBodyBytes caps an admin API request body.
const MaxBodyBytes = 64 << 10

// The admin API, served on its own listener (admin.listen) and guarded by its own bearer key:
//
//	GET  /v1/approvals[?state=pending[,approved…]]  {"approvals": [Request…]}, oldest first; all states without ?state
//	POST /v1/approvals/{id}/approve  body {"by": "…"} (optional)            the Request as approved
//	POST /v1/approvals/{id}/deny     body {"by": "…", "reason": "…"}         the Request as denied
//
// Errors are {"error": "…"}: 401 without a valid key, 400 for a bad body or state, 404 for an unknown
// id, 409 for a request that is not pending (decided or expired), 503 while a shared store cannot be
// reached (nothing was decided, and nothing is listed: never an empty or old list), 500 when the store
// fails otherwise (a damaged approvals file). No CORS headers are sent, so browsers
// cannot read the answers of cross-origin requests.

// ListResponse is the body of GET /v1/approvals.
type ListResponse struct {
	Approvals []Request `json:"approvals"`
}

// DecideRequest is the optional body of approve and deny.
type DecideRequest struct {
	By     string `json:"by,omitempty"`     // who decided; default "admin"
	Reason string `json:"reason,omitempty"` // deny only
}

type errorBody struct {
	Error string `json:"error"`
}

// Handler serves the admin API for s. adminKeyHash is the SHA-256 hex of the admin key (admin.key_sha256);
// when it is empty every request is refused. log records decisions and refused credentials.
func Handler(s Store, adminKeyHash string, log *slog.Logger) http.Handler {
	h := newHandler(adminKeyHash, log)
	h.store = s
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/approvals", h.list)
	mux.HandleFunc("POST /v1/approvals/{id}/approve", h.decide(false))
	mux.HandleFunc("POST /v1/approvals/{id}/deny", h.decide(true))
	return h.auth(mux)
}

// RequireAdminKey serves next only to requests bearing the admin key (the same check as the
// approvals API), for other admin endpoints such as /metrics.
func RequireAdminKey(adminKeyHash string, log *slog.Logger, next http.Handler) http.Handler {
	return newHandler(adminKeyHash, log).auth(next)
}

func newHandler(adminKeyHash string, log *slog.Logger) *handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{log: log}
	if want, err := hex.DecodeString(strings.ToLower(adminKeyHash)); err == nil && len(want) == sha256.Size {
		h.keyHash = want
	}
	return h
}

type handler struct {
	store   Store
	keyHash []byte // nil: no key configured, nothing is accepted
	log     *slog.Logger
}

func (h *handler) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(token))
		if !ok || h.keyHash == nil || subtle.ConstantTimeCompare(sum[:], h.keyHash) != 1 {
			if ok {
				h.log.Warn("admin API: invalid admin key", "remote", r.RemoteAddr, "path", r.URL.Path)
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="toolgate-admin"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{"an admin key is required (Authorization: Bearer <key>)"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	var want []State
	for _, v := range r.URL.Query()["state"] {
		for name := range strings.SplitSeq(v, ",") {
			st, err := ParseState(strings.TrimSpace(name))
			if err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
				return
			}
			want = append(want, st)
		}
	}
	list, err := h.store.List(want...)
	switch {
	case errors.Is(err, ErrUnavailable):
		// Never an empty (or old) list: the approver would read that nothing waits.
		h.unavailable(w, err, "the approvals store (the shared state store) is unavailable; what is waiting cannot be known, try again")
		return
	case err != nil:
		h.failed(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ListResponse{Approvals: list})
}

// unavailable answers 503 for a store that cannot be reached right now.
func (h *handler) unavailable(w http.ResponseWriter, err error, msg string) {
	h.log.Error("admin API: approvals store", "err", err)
	w.Header().Set("Retry-After", "1")
	writeJSON(w, http.StatusServiceUnavailable, errorBody{msg})
}

// failed answers 500 for any other store failure; the log says what it was.
func (h *handler) failed(w http.ResponseWriter, err error) {
	h.log.Error("admin API: approvals store", "err", err)
	writeJSON(w, http.StatusInternalServerError, errorBody{"the approvals store failed; see the gateway log"})
}

func (h *handler) decide(deny bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body DecideRequest
		data, err := io.ReadAll(r.Body)
		if err != nil {
			writeJSON(w, http.StatusRequestEntityTooLarge, errorBody{fmt.Sprintf("request body over %d bytes", MaxBodyBytes)})
			return
		}
		if len(bytes.TrimSpace(data)) > 0 {
			dec := json.NewDecoder(bytes.NewReader(data))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&body); err != nil {
				writeJSON(w, http.StatusBadRequest, errorBody{"invalid JSON body: " + err.Error()})
				return
			}
		}
		by := strings.TrimSpace(body.By)
		if by == "" {
			by = "admin"
		}
		id := r.PathValue("id")
		var req Request
		if deny {
			req, err = h.store.Deny(id, by, body.Reason)
		} else {
			req, err = h.store.Approve(id, by)
		}
		switch {
		case errors.Is(err, ErrNotFound):
			writeJSON(w, http.StatusNotFound, errorBody{err.Error()})
			return
		case errors.Is(err, ErrNotPending), errors.Is(err, ErrExpired), errors.Is(err, ErrRuleGone):
			writeJSON(w, http.StatusConflict, errorBody{err.Error()})
			return
		case errors.Is(err, ErrUnavailable):
			h.unavailable(w, err, "the approvals store (the shared state store) is unavailable; nothing was decided, try again")
			return
		case err != nil:
			h.failed(w, err)
			return
		}
		h.log.Info("approval decided", "id", req.ID, "state", req.State, "by", req.DecidedBy,
			"principal", req.Principal, "tool", req.Tool, "rule", req.Rule)
		writeJSON(w, http.StatusOK, req)
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// Client talks to the admin API of a running gateway, for `toolgate approvals`.
type Client struct {
	URL  string       // base URL, e.g. http://127.0.0.1:8081
	Key  string       // the admin key itself (not its hash)
	HTTP *http.Client // nil: a client with a 30-second timeout
}

// APIError is an answer other than 200 from the admin API.
type APIError struct {
	Status int
	Msg    string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("admin API: %d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
}

// List returns the requests in the given states (all when none is given).
func (c *Client) List(ctx context.Context, states ...State) ([]Request, error) {
	path := "/v1/approvals"
	if len(states) > 0 {
		names := make([]string, len(states))
		for i, s := range states {
			names[i] = string(s)
		}
		path += "?state=" + url.QueryEscape(strings.Join(names, ","))
	}
	var out ListResponse
	if err := c.do(ctx, http.MethodGet, path, nil, &out); err != nil {
		return nil, err
	}
	return out.Approvals, nil
}

// Approve approves the pending request id.
func (c *Client) Approve(ctx context.Context, id, by string) (Request, error) {
	var out Request
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/approve", DecideRequest{By: by}, &out)
	return out, err
}

// Deny denies the pending request id with reason.
func (c *Client) Deny(ctx context.Context, id, by, reason string) (Request, error) {
	var out Request
	err := c.do(ctx, http.MethodPost, "/v1/approvals/"+url.PathEscape(id)+"/deny", DecideRequest{By: by, Reason: reason}, &out)
	return out, err
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	hc := c.HTTP
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		if json.Unmarshal(data, &eb) != nil || eb.Error == "" {
			eb.Error = strings.TrimSpace(clip(string(data), 200))
		}
		return &APIError{Status: resp.StatusCode, Msg: eb.Error}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("admin API: unexpected answer: %w", err)
	}
	return nil
}
