package audit

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
)

// A report's instants (Report.Now, Family.OldestExpiry) are RFC 3339 UTC
// in JSON, to the microsecond where they have one, as every other time
// bttl prints; a cell's timestamp (Cell.Timestamp) stays the raw number
// Bigtable stores, which need not be a time (a sequence number). Reports
// written before, with instants as microseconds since the epoch, are still
// read (audit merge of old files, checkpoints of an earlier version).

// instant is a bigtable.Timestamp that is an instant, in its JSON form.
type instant bigtable.Timestamp

func (t instant) MarshalJSON() ([]byte, error) {
	tm := bigtable.Timestamp(t).Time().UTC()
	if y := tm.Year(); y < 0 || y > 9999 {
		// RFC 3339 has four-digit years: no audit produces such an
		// instant, but a number is still a faithful one.
		return []byte(strconv.FormatInt(int64(t), 10)), nil
	}
	return json.Marshal(tm.Format(time.RFC3339Nano))
}

func (t *instant) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(b, []byte(`"`)) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bttlerr.Wrap(err, "want an RFC 3339 time")
		}
		// Not bigtable.Time: it goes through UnixNano, which overflows
		// outside the years 1678-2262.
		*t = instant(tm.Unix()*1e6 + int64(tm.Nanosecond()/1e3))
		return nil
	}
	// The earlier form: microseconds since the epoch.
	var us int64
	if err := json.Unmarshal(b, &us); err != nil {
		return bttlerr.Wrap(err, "want an RFC 3339 time (or microseconds since the epoch)")
	}
	*t = instant(us)
	return nil
}

// MarshalJSON writes Now as RFC 3339 (see instant).
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		Table string  `json:"table"` // first, then now, as the fields are declared
		Now   instant `json:"now"`
		plain
	}{r.Table, instant(r.Now), plain(r)})
}

// UnmarshalJSON reads Now as RFC 3339, or as the earlier microseconds.
func (r *Report) UnmarshalJSON(b []byte) error {
	type plain Report
	aux := struct {
		*plain
		Now instant `json:"now"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	r.Now = bigtable.Timestamp(aux.Now)
	return nil
}

// MarshalJSON writes OldestExpiry as RFC 3339 (see instant).
func (f Family) MarshalJSON() ([]byte, error) {
	type plain Family
	return json.Marshal(struct {
		plain
		OldestExpiry instant `json:"oldest_expiry,omitempty"`
	}{plain(f), instant(f.OldestExpiry)})
}

// UnmarshalJSON reads OldestExpiry as RFC 3339, or as the earlier
// microseconds.
func (f *Family) UnmarshalJSON(b []byte) error {
	type plain Family
	aux := struct {
		*plain
		OldestExpiry instant `json:"oldest_expiry,omitempty"`
	}{plain: (*plain)(f)}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	f.OldestExpiry = bigtable.Timestamp(aux.OldestExpiry)
	return nil
}
