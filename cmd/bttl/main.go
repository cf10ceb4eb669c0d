// The package doc is doc.go, generated from the command table (commands.go).

package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// SIGTERM (a Kubernetes pod or Cloud Run task being stopped) is
	// handled as Ctrl-C is: the command's context ends with the signal as
	// its cause, finished work is recorded, and the exit status says which.
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sigs
		if !ok {
			return
		}
		// After the first signal the default handling returns: a second
		// one kills the process if stopping cleanly takes too long.
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		cancel(signalCause{s})
	}()
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	signal.Stop(sigs)
	close(sigs)
	os.Exit(code)
}
