package scanjob

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/internal/bttlerr"
	"github.com/bttl/bttl/internal/keytext"
)

// Range is the row keys in [Start, End); End "" is the table's end.
type Range struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// RowSet is the range as ReadRows takes it.
func (r Range) RowSet() bigtable.RowSet {
	if r.End == "" {
		return bigtable.InfiniteRange(r.Start)
	}
	return bigtable.NewRange(r.Start, r.End)
}

// Contains reports whether key is in the range.
func (r Range) Contains(key string) bool {
	return key >= r.Start && (r.End == "" || key < r.End)
}

// String shows the bounds as every bttl message shows a row key
// (docs/design.md#keys-in-messages: quoted, cut to 64 bytes); a report's
// JSON keeps them whole.
func (r Range) String() string {
	end := "end"
	if r.End != "" {
		end = keytext.Quote(r.End)
	}
	return "[" + keytext.Quote(r.Start) + ", " + end + ")"
}

// MarshalJSON writes a key as a JSON string when it is valid UTF-8 (JSON
// would replace other bytes), else as {"base64": "..."}.
func (r Range) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Start jsonKey `json:"start"`
		End   jsonKey `json:"end"`
	}{jsonKey(r.Start), jsonKey(r.End)})
}

func (r *Range) UnmarshalJSON(b []byte) error {
	var v struct {
		Start jsonKey `json:"start"`
		End   jsonKey `json:"end"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	r.Start, r.End = string(v.Start), string(v.End)
	return nil
}

type jsonKey string

func (k jsonKey) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(k)) {
		return json.Marshal(string(k))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(k))})
}

func (k *jsonKey) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*k = jsonKey(s)
		return nil
	}
	var m struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Base64 == nil {
		return errors.New("bttl: a scan range key is a JSON string or {\"base64\": ...}")
	}
	raw, err := base64.StdEncoding.DecodeString(*m.Base64)
	if err != nil {
		return bttlerr.Wrap(err, "scan range key")
	}
	*k = jsonKey(raw)
	return nil
}

// Coalesce sorts ranges and joins those that touch: the key ranges they
// cover, fewest first. Overlapping ranges are joined too.
func Coalesce(ranges []Range) []Range {
	rs := append([]Range(nil), ranges...)
	sortRanges(rs)
	var out []Range
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].End == "" || r.Start <= out[n-1].End) {
			if out[n-1].End != "" && (r.End == "" || r.End > out[n-1].End) {
				out[n-1].End = r.End
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

func sortRanges(rs []Range) {
	for i := 1; i < len(rs); i++ { // insertion sort: few ranges, and no import for one call
		for j := i; j > 0 && rs[j].Start < rs[j-1].Start; j-- {
			rs[j], rs[j-1] = rs[j-1], rs[j]
		}
	}
}

// Shard is shard Index of Count (0 <= Index < Count).
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// ParseShard reads "i/n", as the CLI's -shard flag takes it.
func ParseShard(s string) (Shard, error) {
	i, n, ok := strings.Cut(s, "/")
	var sh Shard
	var err1, err2 error
	sh.Index, err1 = strconv.Atoi(i)
	sh.Count, err2 = strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil {
		return Shard{}, &OptionError{Option: "shard", Reason: fmt.Sprintf("%q is not i/n, e.g. 0/4", s)}
	}
	if err := sh.check(); err != nil {
		return Shard{}, err
	}
	return sh, nil
}

func (s Shard) check() error {
	if s.Count < 1 || s.Index < 0 || s.Index >= s.Count {
		return &OptionError{Option: "shard", Reason: fmt.Sprintf("%d/%d: want i/n with 0 <= i < n", s.Index, s.Count)}
	}
	return nil
}

// splitKeySpace returns the n-1 keys that split [lo, hi) evenly in the
// key space, keys read as big-endian fractions: a function of its
// arguments only. The keys have the common prefix of lo and hi and four
// more bytes.
func splitKeySpace(lo, hi string, n int) []string {
	prefix := 0
	for prefix < len(lo) && prefix < len(hi) && lo[prefix] == hi[prefix] {
		prefix++
	}
	width := max(len(lo), len(hi), prefix+4)
	num := func(k string) *big.Int {
		b := make([]byte, width)
		copy(b, k)
		return new(big.Int).SetBytes(b)
	}
	a := num(lo)
	b := new(big.Int).Lsh(big.NewInt(1), uint(8*width)) // hi "": past every key
	if hi != "" {
		b = num(hi)
	}
	span := new(big.Int).Sub(b, a)
	keys := make([]string, 0, n-1)
	for j := 1; j < n; j++ {
		v := new(big.Int).Mul(span, big.NewInt(int64(j)))
		v.Div(v, big.NewInt(int64(n)))
		v.Add(v, a)
		k := v.FillBytes(make([]byte, width))
		keys = append(keys, string(k))
	}
	return keys
}
