// Package breaker decides what one upstream attempt's outcome means for the health of that upstream and
// for repeating it, as docs/design.md, Failure semantics, explains.
//
//   - Classify is the single place that turns an error from package upstreams into an Outcome. The
//     executor asks the Outcome whether the breaker should count it and whether the attempt may be
//     repeated; nothing else in the gateway inspects upstream errors.
//   - Set holds one circuit breaker (sony/gobreaker v2, two-step) per upstream. Allow before an attempt,
//     report its Outcome through done after it; an open breaker refuses with *OpenError and the upstream
//     sees no call. Replicas share openings through OnOpen and ForceOpen (shared.go): a breaker opened
//     by failures on one replica refuses calls on all, with nothing shared on a call's path. OncePerFault
//     makes one fault of a connection that failed several attempts at once (Fault) count once.
//   - RetrySafe decides whether a tool may be repeated after an unknown outcome, RetrySettings.Backoff
//     spaces the attempts, and a Budget per upstream bounds how many retries all calls together may add.
//   - Settings and RetrySettings are breaker's own options, with their defaults here (defaults.go); the
//     caller converts the config into them, so breaker does not depend on package config.
//
// Nothing here starts a goroutine or sleeps: the caller waits, inside its call's deadline.
package breaker
