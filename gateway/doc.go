// Package gateway assembles toolgate: the tools/call chain in the order
// written in chain.go, and the gateway's parts around it.
package gateway
