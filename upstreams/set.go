package upstreams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/sanitize"
)

// Set is every configured upstream and the catalog built from them.
type Set struct {
	conns   map[string]*Conn // nil value: configured but not connected
	catalog atomic.Pointer[Catalog]
	log     *slog.Logger
}

// Start connects to every enabled server in parallel, each bounded by its
// init_timeout, and builds the catalog. A server that fails to start does
// not stop the others: it is logged and its tools answer
// upstream_unavailable. Only a catalog that cannot be built (a name
// collision) is an error.
func Start(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Set, error) {
	s := &Set{conns: map[string]*Conn{}, log: log}
	listed := map[string][]Listed{}
	down := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range cfg.ServerNames() {
		srv := cfg.Servers[name]
		if srv.Disabled {
			continue
		}
		wg.Go(func() {
			conn, tools, err := connect(ctx, cfg, srv, log.With("server", name))
			mu.Lock()
			defer mu.Unlock()
			s.conns[name] = conn
			if err != nil {
				down[name] = sanitize.Text(err.Error())
				log.Error("upstream unavailable", "server", name, "err", down[name])
				return
			}
			listed[name] = tools
			log.Info("upstream connected", "server", name, "tools", len(tools))
		})
	}
	wg.Wait()
	cat, err := Build(cfg, listed, down)
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, q := range cat.Quarantined() {
		log.Warn("tool quarantined", "server", q.Server, "tool", q.Upstream, "reason", q.Reason)
	}
	s.catalog.Store(cat)
	return s, nil
}

// connect dials one server and lists its tools within its init_timeout.
func connect(ctx context.Context, cfg *config.Config, srv *config.Server, log *slog.Logger) (*Conn, []Listed, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.InitTimeout(srv.Name))
	defer cancel()
	conn, err := Dial(ctx, srv, int(maxMessageBytes(cfg, srv)), log)
	if err != nil {
		return nil, nil, boundErr(ctx, cfg, srv, err)
	}
	tools, err := conn.ListTools(ctx)
	if err != nil {
		conn.Close()
		return nil, nil, boundErr(ctx, cfg, srv, fmt.Errorf("tools/list: %w", err))
	}
	return conn, tools, nil
}

func boundErr(ctx context.Context, cfg *config.Config, srv *config.Server, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer within init_timeout %s: %w", cfg.InitTimeout(srv.Name), err)
	}
	return err
}

// frameSlack is room for the JSON-RPC envelope and escaping around a result
// at the transport cap; the exact per-tool cap is applied to the result.
const frameSlack = 64 << 10

// maxMessageBytes is the transport cap for one server: the largest result
// cap of any of its tools, plus framing.
func maxMessageBytes(cfg *config.Config, srv *config.Server) int64 {
	largest := cfg.MaxResultBytes(srv.Name, "")
	for tool := range srv.Tools {
		largest = max(largest, cfg.MaxResultBytes(srv.Name, tool))
	}
	return largest + frameSlack
}

// Catalog returns the current catalog.
func (s *Set) Catalog() *Catalog { return s.catalog.Load() }

// CallTool sends tools/call to a server.
func (s *Set) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (json.RawMessage, error) {
	conn := s.conns[server]
	if conn == nil {
		return nil, &CallError{Where: NotSent, Err: ErrNotConnected}
	}
	return conn.CallTool(ctx, tool, args)
}

// Close stops every upstream in parallel: each stdio child may take
// seconds to exit, and shutdown must not take that times the count.
func (s *Set) Close() {
	var wg sync.WaitGroup
	for _, c := range s.conns {
		if c != nil {
			wg.Go(c.Close)
		}
	}
	wg.Wait()
}
