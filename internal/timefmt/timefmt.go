// Package timefmt is how bttl prints instants and durations to people and
// in JSON: one rule for every command and report (docs/design.md#cli-messages).
//
// An instant is RFC 3339 in UTC with exactly six fractional digits (a
// Bigtable timestamp's microseconds), so that columns of instants line up;
// a year past 9999, which RFC 3339 cannot write and encoding/json refuses,
// is written in ISO 8601's expanded form with a sign ("+10000-01-01T...").
// A duration is written in the units schema files use (days, then hours,
// minutes, seconds, as github.com/xhit/go-str2duration parses them): "60d",
// not "1440h0m0s".
package timefmt

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/xhit/go-str2duration/v2"
)

// layout is an instant from year 0 to 9999.
const layout = "2006-01-02T15:04:05.000000Z07:00"

// Instant formats t in UTC at fixed width.
func Instant(t time.Time) string {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return fmt.Sprintf("%+d", y) + t.Format(layout[len("2006"):])
	}
	return t.Format(layout)
}

// ParseInstant reads what Instant writes, and any RFC 3339 time.
func ParseInstant(s string) (time.Time, error) {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		i := strings.IndexByte(s[1:], '-') + 1
		if i <= 1 {
			return time.Time{}, fmt.Errorf("instant %q: want an RFC 3339 time", s)
		}
		y, err := strconv.Atoi(s[:i])
		if err != nil {
			return time.Time{}, fmt.Errorf("instant %q: year: %w", s, err)
		}
		// 2000 is a leap year: every month and day of the expanded year
		// parses; the date is then rebuilt in its own year.
		t, err := time.Parse(time.RFC3339Nano, "2000"+s[i:])
		if err != nil {
			return time.Time{}, fmt.Errorf("instant %q: %w", s, err)
		}
		t = t.UTC()
		out := time.Date(y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
		if out.Month() != t.Month() {
			return time.Time{}, fmt.Errorf("instant %q: day out of range", s)
		}
		return out, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return t.UTC(), nil
}

// Duration formats d in days and smaller units: "60d", "1d12h", "90ms".
func Duration(d time.Duration) string {
	sign, u := "", uint64(d)
	if d < 0 {
		sign, u = "-", -u // exact for the smallest Duration too
	}
	const day = uint64(24 * time.Hour)
	days, rest := u/day, time.Duration(u%day)
	switch {
	case days == 0:
		return sign + str2duration.String(rest)
	case rest == 0:
		return sign + strconv.FormatUint(days, 10) + "d"
	}
	return sign + strconv.FormatUint(days, 10) + "d" + str2duration.String(rest)
}

// ErrDuration is a duration Duration did not write.
var ErrDuration = errors.New("bttl: not a duration")

// ParseDuration reads what Duration writes (and Go's durations).
func ParseDuration(s string) (time.Duration, error) {
	d, err := str2duration.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q: %v", ErrDuration, s, err)
	}
	return d, nil
}
