// Command bttl checks and provisions the GC rules bttl's strategies need,
// and audits what a table holds before a strategy is adopted.
//
//	bttl -project P -instance I -schema schema.yaml verify [-table T]
//	bttl -project P -instance I -schema schema.yaml plan   [-table T]
//	bttl -project P -instance I -schema schema.yaml apply  [-table T] [-yes] [-force]
//	bttl -project P -instance I -schema schema.yaml audit  [-table T] [-json] [-prefix P | -start K -end K] [-sample F] [-limit N]
//
// Flags follow cbt: -project and -instance name the instance, and
// BIGTABLE_EMULATOR_HOST points both clients at an emulator. The schema
// file format is documented in package schemafile.
//
// Exit status: 0 when all is well, 1 when verify finds a mismatch or apply
// refuses or is not confirmed, 2 on a usage or connection error.
package main

import (
	"context"
	"os"
	"os/signal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
