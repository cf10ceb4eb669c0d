package sqlscan

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/status"

	"github.com/bttl/bttl/internal/keytext"
	"github.com/bttl/bttl/internal/rules"
)

// Error is a refused SQL query (ttlclient.SQLError): the query, the table
// it reads (empty when it could not be found), the managed families at
// risk, and why.
type Error struct {
	Query    string
	Table    string
	Families []string // the table's managed families, sorted
	Reason   string   // why the query could not be classified, if it could not
	Err      error    // rules.ErrUnfilteredSQL or rules.ErrSQLUnknownTable

	text keytext.Text // shows Query: quoted and cut, or redacted (WithKeyRedaction)
}

// Refusal is the error refusing query for f, its finding, with the query
// shown by text.
func (f *Finding) Refusal(query string, text keytext.Text) *Error {
	err := rules.ErrUnfilteredSQL
	if f.Unknown {
		err = rules.ErrSQLUnknownTable
	}
	return &Error{Query: query, Table: f.Table, Families: f.Families, Reason: f.Reason, Err: err, text: text}
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Err.Error())
	if e.Table != "" {
		fmt.Fprintf(&b, " (table %q", e.Table)
	} else {
		b.WriteString(" (")
	}
	if len(e.Families) > 0 {
		fmt.Fprintf(&b, ", managed families %q", e.Families)
	}
	if e.Reason != "" {
		if e.Table != "" {
			b.WriteString(", ")
		}
		if e.text.Redacts() && e.Table == "" {
			// A parse failure's reason may quote a token of the query: a
			// literal holding a key.
			b.WriteString("the query could not be classified (the reason, which may quote it, is in SQLError.Reason)")
		} else {
			b.WriteString(e.Reason)
		}
	}
	b.WriteString(", query " + e.text.KeyN(e.Query, 80) + ")")
	b.WriteString(": read with ReadRows, or pass ttlclient.WithSQLAllowed() to accept expired cells")
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// GRPCStatus is the refusal's status, from bttl's refusal registry.
func (e *Error) GRPCStatus() *status.Status { return rules.Status(e.Err, e.Error()) }
