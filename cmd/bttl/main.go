// Command bttl checks and provisions the GC rules bttl's strategies need,
// audits what a table holds before a strategy is adopted, and writes a
// schema file from an instance's existing tables.
//
//	bttl [global flags] verify [-table T]
//	bttl [global flags] plan   [-table T] [-family F,G] [-workers N] [-assume-adopted]
//	bttl [global flags] apply  [-table T] [-family F,G] [-yes] [-force] [-assume-adopted]
//	bttl [global flags] audit  [-table T] [-json] [-prefix P | -start K -end K] [-sample F] [-limit N] [-fail-on LIST] [-progress D]
//	                           [-workers N] [-cells-per-second R] [-shard I/N [-shard-keys FILE]] [-checkpoint FILE] [-now TIME]
//	bttl [global flags] audit  -table T -suggest-shard-keys N
//	bttl audit merge [-json] [-fail-on LIST] [-metrics-out FILE] FILE...
//	bttl [global flags] migrate -table T -family F -from real|one-second|default-expiry:D [-to-family G] [-ttl D] [-ttl-rule R]... [-first-switch T -written-before T [-clock-skew D] [-write-time-complete]]
//	                           [-expired keep|delete [-expect-expired N -expired-as-of T]] [-inflight N] [-dry-run]
//	bttl [global flags] init   [-table T] [-force]
//	bttl [global flags] lookup [-json] [-now TIME] TABLE ROW
//	bttl [global flags] read   [-json] [-now TIME] [-start K -end K | -prefix P] [-count N] TABLE
//	bttl help [command]
//
// Global flags (before or after the command): -project, -instance,
// -schema, -creds, -app-profile, -data-endpoint, -admin-endpoint,
// -cert-file, -user-agent, -timeout, -version. Flags follow cbt:
// -project and -instance name the instance, -creds a service account key
// file (default: Application Default Credentials), and
// BIGTABLE_EMULATOR_HOST points both clients at an emulator. As with cbt,
// $HOME/.cbtrc ("key = value" lines: project, instance, creds, timeout,
// data-endpoint, admin-endpoint, cert-file, user-agent) gives defaults to
// the flags the command line leaves unset. The schema
// file format is documented in package schemafile.
//
// Exit status: 0 when all is well, 1 on a finding or mismatch (or when
// apply refuses or is not confirmed, or plan shows that apply would), 2 on a usage, file or connection
// error, 130 when interrupted (Ctrl-C), 143 when terminated (SIGTERM).
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
