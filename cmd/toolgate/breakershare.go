package main

import (
	"github.com/toolgate/toolgate/breaker"
	breakerredis "github.com/toolgate/toolgate/breaker/redisstore"
)

// shareBreakers shares circuit breaker openings with the other replicas
// when there is a shared store (state.redis): an upstream's breaker opened
// by failures seen here is forced open on every other replica for the rest
// of its open_for, and theirs here. Each replica still counts only its own
// calls' outcomes, and nothing shared is on a call's path (breaker/shared.go
// and breaker/redisstore say why). Without the store, or while it is down,
// each replica's breakers decide alone.
func shareBreakers(gw *gateway, breakers *breaker.Set) {
	if gw.state == nil {
		return
	}
	sync := breakerredis.New(gw.state, gw.replica, gw.cfg.ServerNames(), breakers.ForceOpen)
	breakers.OnOpen(sync.Opened)
	sync.Start()
}
