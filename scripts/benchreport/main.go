// Command benchreport turns the output of the ttlclient benchmarks into the
// tables of docs/benchmarks.md: per pair, raw and ttlclient ns/op, B/op,
// allocs/op and the ratio; and the scale section. scripts/bench.sh runs it.
//
// Per pair of sub-benchmarks (impl=raw, impl=ttl) the time ratio is the
// ratio of the medians over the -count runs. The end-to-end targets are
// judged on BenchmarkInterleaved instead, which alternates raw and ttl
// operations inside one loop and reports ttl/raw itself: there the table
// shows the median of the runs' ratios and their range [min, max].
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// result is one benchmark line.
type result struct {
	metrics map[string]float64
}

// bench is one benchmark name without its impl, with every run of each impl.
type bench struct {
	name  string
	order int
	runs  map[string][]result // impl -> runs, in file order
}

var lineRE = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+(.*)$`)

func parse(r io.Reader) (map[string]*bench, []string, error) {
	byName := map[string]*bench{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name, impl := m[1], ""
		parts := strings.Split(name, "/")
		kept := parts[:0]
		for _, p := range parts {
			if v, ok := strings.CutPrefix(p, "impl="); ok {
				impl = v
				continue
			}
			kept = append(kept, p)
		}
		if impl == "" {
			continue
		}
		name = strings.Join(kept, "/")
		fields := strings.Fields(m[3])
		res := result{metrics: map[string]float64{}}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, nil, fmt.Errorf("%q: %w", sc.Text(), err)
			}
			res.metrics[fields[i+1]] = v
		}
		b, ok := byName[name]
		if !ok {
			b = &bench{name: name, order: len(order), runs: map[string][]result{}}
			byName[name] = b
			order = append(order, name)
		}
		b.runs[impl] = append(b.runs[impl], res)
	}
	return byName, order, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func values(rs []result, unit string) []float64 {
	var out []float64
	for _, r := range rs {
		if v, ok := r.metrics[unit]; ok {
			out = append(out, v)
		}
	}
	return out
}

// ratio is a median ratio and the range it comes from.
type ratio struct{ med, min, max float64 }

func (r ratio) String() string {
	return fmt.Sprintf("%.3f [%.3f, %.3f]", r.med, r.min, r.max)
}

func verdict(r ratio, target float64) string {
	switch {
	case r.max <= target:
		return "met"
	case r.med <= target:
		return "met at the median; the range crosses " + trim(target)
	}
	return fmt.Sprintf("missed by %.0f%%", (r.med/target-1)*100)
}

func trim(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func num(f float64) string {
	switch {
	case f >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// target is the target for a benchmark family.
func target(name string) (timeTarget float64, allocNote string) {
	top := strings.SplitN(name, "/", 2)[0]
	switch top {
	case "BenchmarkApply", "BenchmarkApplyBulk", "BenchmarkReadRow", "BenchmarkReadRows":
		return 1.03, ""
	case "BenchmarkMutationBuild":
		return 1.5, "allocs <= raw + 2"
	case "BenchmarkReadFilter":
		return 0, "ttl allocs <= 3 (3 managed families)"
	}
	return 0, ""
}

func mainTable(w io.Writer, byName map[string]*bench, order []string) {
	fmt.Fprintln(w, "| benchmark | raw ns/op | ttl ns/op | ttl/raw (medians) | target | raw B/op | ttl B/op | raw allocs/op | ttl allocs/op | allocs target |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---:|---:|---:|---:|---|")
	for _, name := range order {
		b := byName[name]
		raw, ttl := b.runs["raw"], b.runs["ttl"]
		if len(raw) == 0 || len(ttl) == 0 {
			continue
		}
		rm := median(values(ttl, "ns/op")) / median(values(raw, "ns/op"))
		r := ratio{med: rm, min: rm, max: rm}
		tt, allocNote := target(name)
		tv := ""
		switch {
		case tt == 1.03:
			tv = "see the interleaved table"
		case tt > 0:
			tv = "<= " + trim(tt) + ": " + verdict(r, tt)
		}
		ra, ta := median(values(raw, "allocs/op")), median(values(ttl, "allocs/op"))
		av := ""
		switch {
		case strings.HasPrefix(allocNote, "allocs <= raw + 2"):
			av = fmt.Sprintf("<= raw+2: %s (+%.0f)", okMissed(ta <= ra+2), ta-ra)
		case strings.HasPrefix(allocNote, "ttl allocs <= 3"):
			av = "<= 3: " + okMissed(ta <= 3)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %.3f | %s | %s | %s | %s | %s | %s |\n",
			strings.TrimPrefix(name, "Benchmark"),
			num(median(values(raw, "ns/op"))), num(median(values(ttl, "ns/op"))), rm, tv,
			num(median(values(raw, "B/op"))), num(median(values(ttl, "B/op"))),
			num(ra), num(ta), av)
	}
}

func okMissed(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// filterTable compares the library with the raw client sending the same
// TTL filter (impl=rawfilter): the wrapper's own cost on reads.
func filterTable(w io.Writer, byName map[string]*bench, order []string) {
	fmt.Fprintln(w, "| benchmark | raw+filter ns/op | ttl ns/op | ttl/(raw+filter) (medians) | raw+filter allocs/op | ttl allocs/op | ttl/raw (medians) |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---|")
	for _, name := range order {
		b := byName[name]
		rf, ttl, raw := b.runs["rawfilter"], b.runs["ttl"], b.runs["raw"]
		if len(rf) == 0 || len(ttl) == 0 {
			continue
		}
		r := median(values(ttl, "ns/op")) / median(values(rf, "ns/op"))
		r0 := median(values(ttl, "ns/op")) / median(values(raw, "ns/op"))
		fmt.Fprintf(w, "| %s | %s | %s | %.3f | %s | %s | %.3f |\n",
			strings.TrimPrefix(name, "Benchmark"),
			num(median(values(rf, "ns/op"))), num(median(values(ttl, "ns/op"))), r,
			num(median(values(rf, "allocs/op"))), num(median(values(ttl, "allocs/op"))), r0)
	}
}

func scaleTable(w io.Writer, byName map[string]*bench, order []string) {
	fmt.Fprintln(w, "| benchmark | raw ns/cell | ttl ns/cell | ttl/raw | raw peak heap MB | ttl peak heap MB | raw B/op | ttl B/op |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|")
	groups := map[string]map[string][]float64{} // top/impl -> ns/cell medians by size
	var tops []string
	for _, name := range order {
		b := byName[name]
		raw, ttl := b.runs["raw"], b.runs["ttl"]
		if len(raw) == 0 || len(ttl) == 0 {
			continue
		}
		r := median(values(ttl, "ns/cell")) / median(values(raw, "ns/cell"))
		fmt.Fprintf(w, "| %s | %s | %s | %.3f | %s | %s | %s | %s |\n",
			strings.TrimPrefix(name, "Benchmark"),
			num(median(values(raw, "ns/cell"))), num(median(values(ttl, "ns/cell"))), r,
			num(median(values(raw, "peak-heap-MB"))), num(median(values(ttl, "peak-heap-MB"))),
			num(median(values(raw, "B/op"))), num(median(values(ttl, "B/op"))))
		top := strings.SplitN(name, "/", 2)[0]
		if groups[top] == nil {
			groups[top] = map[string][]float64{}
			tops = append(tops, top)
		}
		groups[top]["raw"] = append(groups[top]["raw"], median(values(raw, "ns/cell")))
		groups[top]["ttl"] = append(groups[top]["ttl"], median(values(ttl, "ns/cell")))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Flatness (target: per-cell cost within 20% as the batch grows): largest over smallest median ns/cell across sizes.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| benchmark | raw max/min | ttl max/min | ttl within 20% |")
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, top := range tops {
		spread := func(xs []float64) float64 {
			lo, hi := xs[0], xs[0]
			for _, x := range xs {
				lo, hi = min(lo, x), max(hi, x)
			}
			return hi / lo
		}
		rs, ts := spread(groups[top]["raw"]), spread(groups[top]["ttl"])
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %s |\n", strings.TrimPrefix(top, "Benchmark"), rs, ts, okMissed(ts <= 1.2))
	}
}

// interleavedTable reads BenchmarkInterleaved's own ttl/raw metric.
func interleavedTable(w io.Writer, r io.Reader) error {
	type row struct {
		name            string
		ratios, rw, tts []float64
	}
	var rows []*row
	byName := map[string]*row{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		fields := strings.Fields(m[3])
		vals := map[string]float64{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return err
			}
			vals[fields[i+1]] = v
		}
		if _, ok := vals["ttl/raw"]; !ok {
			continue
		}
		rw, ok := byName[m[1]]
		if !ok {
			rw = &row{name: m[1]}
			byName[m[1]] = rw
			rows = append(rows, rw)
		}
		rw.ratios = append(rw.ratios, vals["ttl/raw"])
		rw.rw = append(rw.rw, vals["raw-ns/op"])
		rw.tts = append(rw.tts, vals["ttl-ns/op"])
	}
	fmt.Fprintln(w, "| operation | raw ns/op | ttl ns/op | ttl/raw: median [min, max] of runs | target |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|")
	for _, rw := range rows {
		s := append([]float64(nil), rw.ratios...)
		sort.Float64s(s)
		r := ratio{med: median(s), min: s[0], max: s[len(s)-1]}
		name, tgt := strings.TrimPrefix(rw.name, "BenchmarkInterleaved/"), 1.03
		if b, ok := strings.CutPrefix(rw.name, "BenchmarkInterleavedBuild/"); ok {
			// The pure build + rewrite of a 10-cell mutation, no I/O.
			name, tgt = b+"/op=MutationBuild (pure)", 1.5
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | <= %s: %s |\n", name,
			num(median(rw.rw)), num(median(rw.tts)), r, trim(tgt), verdict(r, tgt))
	}
	return sc.Err()
}

func main() {
	mainPath := flag.String("main", "", "output of the pair benchmarks")
	scalePath := flag.String("scale", "", "output of the scale benchmarks")
	interPath := flag.String("interleaved", "", "output of BenchmarkInterleaved")
	section := flag.String("section", "main", "table to print: main, filter, interleaved or scale")
	flag.Parse()
	path := *mainPath
	switch *section {
	case "scale":
		path = *scalePath
	case "interleaved":
		path = *interPath
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	if *section == "interleaved" {
		if err := interleavedTable(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	byName, order, err := parse(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	switch *section {
	case "main":
		mainTable(os.Stdout, byName, order)
	case "filter":
		filterTable(os.Stdout, byName, order)
	case "scale":
		scaleTable(os.Stdout, byName, order)
	default:
		fmt.Fprintln(os.Stderr, "unknown section", *section)
		os.Exit(2)
	}
}
