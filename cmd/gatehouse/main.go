// Command gatehouse is the single-binary API-key gateway: key management
// and the authenticated proxy on one listener, the agent gateway on another.
//
//	gatehouse serve [--config FILE] [--data-dir DIR] [--port N] ...
//
// See run.go for the flags and the GATEHOUSE_* environment variables.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
}
