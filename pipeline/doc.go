// Package pipeline is the chain every tools/call passes, from the
// authenticated call to its recorded answer.
//
// A Link is an interceptor: it gets the call's Exchange and the rest of the
// chain (next), and either stops the call with an *envelope.Error, or calls
// next once and returns what next returned. Links that must see the
// outcome of what follows them (the record, approvals, duplicate
// suppression) do their work around next; the others are a check before
// it (Step). A Chain runs its links in order and adds what every link
// needs: a span and a duration per link, and a recovered panic turned into
// internal_error, so that a bug in one call never takes the gateway down.
//
// This package holds the chain itself and the links every gateway has
// (record, authenticate, resolve, authorize, validate, conditions, audit,
// execute, normalize). Each guard (rate limits, approvals, duplicate
// suppression) is a package of its own that provides its link. The order
// in which a gateway runs them is written once, in gateway/chain.go; the
// design is in docs/design.md, "The pipeline".
package pipeline
