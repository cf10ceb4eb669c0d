package filters_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/bttl/bttl/filters"
	"github.com/bttl/bttl/strategy"
)

var tsRange = regexp.MustCompile(`timestamp_range\((-?\d+),(-?\d+)\)`)

// bounds are the timestamp-range bounds in a filter's rendering, in order.
func bounds(t *testing.T, f bigtable.Filter) []int64 {
	t.Helper()
	if f == nil {
		return nil
	}
	var out []int64
	for _, m := range tsRange.FindAllStringSubmatch(f.String(), -1) {
		for _, s := range m[1:] {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("bound %q: %v", s, err)
			}
			out = append(out, v)
		}
	}
	return out
}

// fuzzSchema builds a schema from fuzz input: names separated by commas,
// one policy kind per name.
func fuzzSchema(names string, kinds []byte, d int64, n uint8) strategy.Schema {
	schema := strategy.Schema{}
	dur := time.Duration(d%(1<<40)) * time.Millisecond
	for i, name := range strings.Split(names, ",") {
		if i >= 8 {
			break
		}
		k := byte(i)
		if i < len(kinds) {
			k = kinds[i]
		}
		switch k % 6 {
		case 0:
			schema[name] = strategy.Unmanaged()
		case 1:
			schema[name] = strategy.OneSecond()
		case 2:
			schema[name] = strategy.DefaultExpiry(dur)
		case 3:
			schema[name] = strategy.Sequence(int(n))
		case 4:
			schema[name] = strategy.OneSecond(strategy.WithMaxVersions(int(n)))
		default:
			schema[name] = strategy.DefaultExpiry(dur, strategy.SingleValue())
		}
	}
	return schema
}

// FuzzBuilder: for any schema, New either refuses it with ErrInvalidPolicy
// or builds filters that never panic, whose every timestamp bound is a
// multiple of 1000 and never moves back as time goes on, that compose
// without one-element chains, and whose family regexes split the names
// exactly (managed names match their own branch and not the unmanaged
// one; any other name only the unmanaged one).
func FuzzBuilder(f *testing.F) {
	f.Add("one,def,seq,plain", []byte{1, 2, 3, 0}, int64(3_600_000), uint8(3), int64(1_700_000_000_123_456), int64(1500), "other")
	f.Add("a,a.b,a-", []byte{2, 4, 5}, int64(1000), uint8(1), int64(0), int64(999), "a.")
	f.Add("x", []byte{3}, int64(0), uint8(0), int64(-5), int64(-1), "x")
	f.Add("bad name,ok", []byte{1, 1}, int64(1), uint8(2), int64(1<<62), int64(1<<62), "")
	f.Add("_f,F9", []byte{5, 2}, int64(-7), uint8(255), int64(9_223_372_036_854_775_807), int64(0), "_f")
	f.Fuzz(func(t *testing.T, names string, kinds []byte, d int64, n uint8, now, later int64, probe string) {
		schema := fuzzSchema(names, kinds, d, n)
		b, err := filters.New(schema)
		if err != nil {
			if !errors.Is(err, strategy.ErrInvalidPolicy) {
				t.Fatalf("schema %v refused without ErrInvalidPolicy: %v", schema, err)
			}
			return
		}
		var managed []string
		ages := 0
		for name, p := range schema {
			if p.Managed() {
				managed = append(managed, name)
			}
			if (p.Kind() == strategy.KindOneSecond || p.Kind() == strategy.KindDefaultExpiry) && !p.AllExpired(bigtable.Timestamp(now)) {
				ages++ // past the largest timestamp an age family may have no branch left
			}
		}
		ttl := b.TTL(bigtable.Timestamp(now))
		if b.Managed() != (len(managed) > 0) || (ttl == nil) != (len(managed) == 0) {
			t.Fatalf("schema %v: managed %v, TTL filter %v", schema, b.Managed(), ttl)
		}
		if ttl == nil {
			if b.Compose(bigtable.Timestamp(now), nil) != nil {
				t.Fatal("Compose of nothing is not nil")
			}
			return
		}
		bs := bounds(t, ttl)
		if len(bs) != 2*ages {
			t.Fatalf("schema %v: %d timestamp bounds for %d age families in %s", schema, len(bs), ages, ttl)
		}
		for _, v := range bs {
			if v%1000 != 0 || v < 0 {
				t.Fatalf("bound %d in %s", v, ttl)
			}
		}
		for _, v := range bounds(t, b.Expired(bigtable.Timestamp(now))) {
			if v%1000 != 0 || v < 0 {
				t.Fatalf("expired-filter bound %d", v)
			}
		}
		if later < 0 {
			later = -(later + 1)
		}
		if now2 := now + later; now2 >= now {
			bs2 := bounds(t, b.TTL(bigtable.Timestamp(now2)))
			switch {
			case len(bs2) == len(bs):
				for i := range bs {
					if bs2[i] < bs[i] {
						t.Fatalf("bound %d at %d moved back to %d at %d", bs[i], now, bs2[i], now2)
					}
				}
			case len(bs2) > len(bs) || now2 < int64(strategy.MaxTimestamp):
				// Only an age family with no live cell left (past the
				// largest timestamp) loses its branch: its bound went to
				// infinity, not back.
				t.Fatalf("%d bounds at %d, %d at %d", len(bs), now, len(bs2), now2)
			}
		}
		if got := b.Compose(bigtable.Timestamp(now), nil); got.String() != ttl.String() {
			t.Fatalf("Compose(nil) = %s, want the TTL filter %s", got, ttl)
		}
		user := bigtable.LatestNFilter(1)
		if got, want := b.Compose(bigtable.Timestamp(now), user).String(), bigtable.ChainFilters(ttl, user).String(); got != want {
			t.Fatalf("Compose = %s, want %s", got, want)
		}

		comp := regexp.MustCompile(filters.ComplementRegex(managed))
		isManaged := map[string]bool{}
		for _, name := range managed {
			isManaged[name] = true
			own := regexp.MustCompile(filters.FamilyRegex(name))
			if !own.MatchString(name) || comp.MatchString(name) {
				t.Fatalf("managed %q: own regex %v, unmanaged regex %v", name, own.MatchString(name), comp.MatchString(name))
			}
			if probe != name && own.MatchString(probe) {
				t.Fatalf("%q matches the regex of %q", probe, name)
			}
		}
		if comp.MatchString(probe) == isManaged[probe] {
			t.Fatalf("probe %q: managed %v, unmanaged regex matches %v (%s)", probe, isManaged[probe], comp.MatchString(probe), comp)
		}
	})
}
