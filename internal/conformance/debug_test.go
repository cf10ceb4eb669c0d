package conformance

import (
	"context"
	"fmt"
	"os"

	"cloud.google.com/go/bigtable"
	"github.com/bttl/bttl/internal/model"
)

func init() {
	traceRow = os.Getenv("BTTL_TRACE")
}

func (r *runner) trace() {
	if traceRow == "" || r.cfg.Raw == nil {
		return
	}
	row, _ := r.cfg.Raw.ReadRow(context.Background(), traceRow)
	fmt.Printf("step %d model:\n%sraw:\n%s", r.step, model.Format(r.m.Stored(traceRow)), model.Format(fromRow(row)))
	_ = bigtable.Row{}
}
