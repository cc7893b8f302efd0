// Command gatehouse is the single-binary API-key gateway: key management
// and the authenticated proxy on one listener, the agent gateway on another.
//
//	gatehouse serve [--config FILE] [--data-dir DIR] [--port N] ...
//	gatehouse reset-password [--config FILE] [--data-dir DIR]
//	gatehouse repair [--config FILE] [--data-dir DIR]
//	gatehouse version
//
// See run.go for the flags and the GATEHOUSE_* environment variables.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil && !errors.Is(err, errHelp) {
		fmt.Fprintln(os.Stderr, "gatehouse:", err)
		os.Exit(1)
	}
}
