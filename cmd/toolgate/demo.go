package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/toolgate/toolgate/demo/orders"
)

func runDemoOrders(args []string) int {
	if len(args) != 0 {
		fmt.Fprintln(os.Stderr, "usage: toolgate demo-orders   (an MCP server on stdin/stdout)")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := orders.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, "demo-orders:", err)
		return 1
	}
	return 0
}
