// Package bttlerr holds bttl's one error-text convention
// (docs/design.md#errors): every error text a bttl package creates starts
// with exactly one Prefix, as the bigtable client's start with
// "bigtable: ". Sentinels and struct errors' Error() write it; Wrap puts
// context in front of an error and keeps the one prefix; a struct error
// that prints an error it wraps prints it through Trim.
package bttlerr

import (
	"fmt"
	"strings"
)

// Prefix starts every error text bttl creates.
const Prefix = "bttl: "

// Wrap returns err with context in front of it, "bttl: context: cause",
// cause being err's text through Trim: the prefix appears once whether err
// is bttl's own or another package's (a gRPC status, an I/O error).
// errors.Is, errors.As and status.Code see err.
func Wrap(err error, format string, a ...any) error {
	return &wrapped{context: fmt.Sprintf(format, a...), err: err}
}

type wrapped struct {
	context string
	err     error
}

func (w *wrapped) Error() string { return Prefix + w.context + ": " + Trim(w.err.Error()) }
func (w *wrapped) Unwrap() error { return w.err }

// Trim is msg without the Prefix where a bttl error's text starts inside
// it: at its start, at the start of each line (errors.Join), and after
// "desc = " (a gRPC status error carrying the wire guard's message).
func Trim(msg string) string {
	msg = strings.TrimPrefix(msg, Prefix)
	msg = strings.ReplaceAll(msg, "\n"+Prefix, "\n")
	return strings.ReplaceAll(msg, "desc = "+Prefix, "desc = ")
}
