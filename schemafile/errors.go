package schemafile

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalidFile: the file cannot be read as a schema file. Every error
// from Load and Parse wraps it and is a *Error; errors about a policy wrap
// strategy.ErrInvalidPolicy as well.
var ErrInvalidFile = errors.New("bttl: invalid schema file")

// Error says where a schema file is wrong: the file, the position, and the
// table, family and key concerned (each empty when it does not apply).
type Error struct {
	File   string // as given to Load; empty for Parse
	Line   int    // 1-based line; 0 when unknown
	Column int    // 1-based column; 0 when unknown
	Offset int64  // 0-based byte offset in a JSON file (Line and Column count from it); -1 for YAML
	Table  string
	Family string
	Key    string
	Err    error // what is wrong
}

func (e *Error) Error() string {
	var b strings.Builder
	// The sentinel carries the one "bttl:" prefix; the messages wrapped
	// here (the strategy package's included) carry their own, dropped so a
	// printed error has exactly one.
	b.WriteString(ErrInvalidFile.Error())
	loc := e.File
	switch {
	case e.Line > 0 && e.Column > 0 && loc != "":
		loc += fmt.Sprintf(":%d:%d", e.Line, e.Column)
	case e.Line > 0 && e.Column > 0:
		loc = fmt.Sprintf("at line %d, column %d", e.Line, e.Column)
	case e.Line > 0 && loc != "":
		loc += fmt.Sprintf(":%d", e.Line)
	case e.Line > 0:
		loc = fmt.Sprintf("at line %d", e.Line)
	}
	if e.Offset >= 0 && e.Line > 0 {
		loc += fmt.Sprintf(" (byte offset %d)", e.Offset)
	}
	if loc != "" {
		b.WriteString(" ")
		b.WriteString(strings.TrimSpace(loc))
	}
	var where []string
	if e.Table != "" {
		where = append(where, fmt.Sprintf("table %q", e.Table))
	}
	if e.Family != "" {
		where = append(where, fmt.Sprintf("family %q", e.Family))
	}
	if e.Key != "" {
		where = append(where, fmt.Sprintf("key %q", e.Key))
	}
	if len(where) > 0 {
		b.WriteString(": ")
		b.WriteString(strings.Join(where, ", "))
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(withoutPrefix(e.Err.Error()))
	}
	return b.String()
}

// Unwrap makes errors.Is match ErrInvalidFile and whatever Err wraps.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrInvalidFile}
	}
	return []error{ErrInvalidFile, e.Err}
}

// withoutPrefix drops the "bttl: " that the project's sentinel errors
// start with, at the start of msg and after each ": ".
func withoutPrefix(msg string) string {
	msg = strings.TrimPrefix(msg, "bttl: ")
	return strings.ReplaceAll(msg, ": bttl: ", ": ")
}
