// Package breaker decides what one upstream attempt's failure means for the
// health of that upstream: the failure classification of DESIGN §5, which
// the per-upstream circuit breakers (sony/gobreaker v2) consult.
//
// Classify is the single place that turns an error from package upstreams
// into an Outcome. The executor asks the Outcome whether the breaker should
// count it and whether the attempt may be repeated; nothing else in the
// gateway inspects upstream errors.
package breaker
