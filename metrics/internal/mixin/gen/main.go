// Command gen writes bttl's alert rules, their unit tests, the dashboard
// and the runbook from metrics/mixin/mixin.yaml. Run it with
// `go generate ./metrics` (its working directory is then metrics/).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/bttl/bttl/metrics/internal/mixin"
)

func main() {
	root := flag.String("root", "..", "the repository's root")
	flag.Parse()
	if err := mixin.Write(*root); err != nil {
		fmt.Fprintln(os.Stderr, "mixin:", err)
		os.Exit(1)
	}
}
