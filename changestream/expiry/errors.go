package expiry

import (
	"errors"
	"fmt"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
)

var (
	// ErrInvalidOption reports an argument or option that cannot work.
	ErrInvalidOption = errors.New("bttl: expiry: invalid option")
	// ErrBadEntry reports an index cell this package did not write.
	ErrBadEntry = errors.New("bttl: expiry: malformed index entry")
)

// Error is a failed index or table call with its context: the operation,
// the table it acted on and the row. Row holds the full key; the message
// shows it as the notifier shows keys (quoted, or redacted with
// WithKeyRedaction).
type Error struct {
	Op    string
	Table string
	Row   string
	Err   error
	keys  keytext.Text
}

func (e *Error) Error() string {
	return fmt.Sprintf("bttl: expiry: %s %s row %s: %s", e.Op, e.Table, e.keys.Key(e.Row), bttlerr.Trim(fmt.Sprint(e.Err)))
}

func (e *Error) Unwrap() error { return e.Err }
