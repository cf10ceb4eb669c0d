// Command benchreport turns the output of the ttlclient benchmarks into the
// tables of BENCHMARKS.md: per pair, raw and ttlclient ns/op, B/op,
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

// serverRuns parses BenchmarkServers* lines: per benchmark name, every
// run's metrics, in file order.
func serverRuns(r io.Reader) (map[string][]map[string]float64, []string, error) {
	return runsWithPrefix(r, "BenchmarkServers")
}

// runsWithPrefix is every run of each benchmark whose name starts with
// prefix: its metrics by unit, benchmarks in file order.
func runsWithPrefix(r io.Reader, prefix string) (map[string][]map[string]float64, []string, error) {
	runs := map[string][]map[string]float64{}
	var order []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := lineRE.FindStringSubmatch(sc.Text())
		if m == nil || !strings.HasPrefix(m[1], prefix) {
			continue
		}
		fields := strings.Fields(m[3])
		vals := map[string]float64{}
		for i := 0; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				return nil, nil, err
			}
			vals[fields[i+1]] = v
		}
		if _, ok := runs[m[1]]; !ok {
			order = append(order, m[1])
		}
		runs[m[1]] = append(runs[m[1]], vals)
	}
	return runs, order, sc.Err()
}

func ratioOf(runs []map[string]float64, unit string) (ratio, bool) {
	var s []float64
	for _, r := range runs {
		if v, ok := r[unit]; ok {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return ratio{}, false
	}
	sort.Float64s(s)
	return ratio{med: median(s), min: s[0], max: s[len(s)-1]}, true
}

func medianOf(runs []map[string]float64, unit string) string {
	var s []float64
	for _, r := range runs {
		if v, ok := r[unit]; ok {
			s = append(s, v)
		}
	}
	if len(s) == 0 {
		return "-"
	}
	return num(median(s))
}

// param is the value of key=value in a benchmark name.
func param(name, key string) string {
	for _, p := range strings.Split(name, "/") {
		if v, ok := strings.CutPrefix(p, key+"="); ok {
			return v
		}
	}
	return ""
}

// serverTarget is issue 17's target for a BenchmarkServers row: the ratio
// it is judged on and its bound.
func serverTarget(schema, op string) (unit string, bound float64) {
	switch {
	case op == "ApplyBulk":
		return "ttl/raw", 1.03
	case schema == "4-family" && op == "ReadRows":
		return "ttl/naive", 0.5
	case schema == "4-family" && op == "ReadRow":
		return "ttl/naive", 0.8
	case (schema == "one-second" || schema == "default-expiry") && (op == "ReadRow" || op == "ReadRows"):
		return "ttl/raw", 1.15
	case schema == "sequence" && op == "ReadRows":
		return "ttl/raw", 1.5
	}
	return "", 0
}

func serversTable(w io.Writer, r io.Reader) error {
	runs, order, err := serverRuns(r)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| server | schema | op | raw ns/op | naive ns/op | ttl ns/op | ttl/naive: median [min, max] | ttl/raw: median [min, max] | target |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---|---|---|")
	for _, name := range order {
		if !strings.HasPrefix(name, "BenchmarkServers/") {
			continue
		}
		rs := runs[name]
		schema, op := param(name, "schema"), param(name, "op")
		tn, okN := ratioOf(rs, "ttl/naive")
		tr, _ := ratioOf(rs, "ttl/raw")
		naive := "-"
		if okN {
			naive = tn.String()
		}
		verdictText := "-"
		if unit, bound := serverTarget(schema, op); unit != "" {
			r := tr
			if unit == "ttl/naive" {
				r = tn
			}
			verdictText = fmt.Sprintf("%s <= %s: %s", unit, trim(bound), verdict(r, bound))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", param(name, "server"), schema, op,
			medianOf(rs, "raw-ns/op"), medianOf(rs, "naive-ns/op"), medianOf(rs, "ttl-ns/op"), naive, tr, verdictText)
	}
	for _, name := range order {
		if strings.HasPrefix(name, "BenchmarkServersScale/") {
			fmt.Fprintln(w)
			serverScaleTable(w, runs, order)
			break
		}
	}
	return nil
}

// serverScaleTable is the BenchmarkServersScale part of the servers section.
func serverScaleTable(w io.Writer, runs map[string][]map[string]float64, order []string) {
	fmt.Fprintln(w, "Scale: ReadRows of rows of one cell (default expiry alone), ns per cell (medians of runs) and GC cycles per round of three scans (one per impl, interleaved); growth is the 100,000-row ns/cell over the 10,000-row one (target: ttl's growth no more than raw's).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | rows | raw ns/cell | naive ns/cell | ttl ns/cell | ttl/raw: median [min, max] | ttl/naive: median [min, max] | GC cycles per round (raw, naive and ttl: 3 scans) |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---|---:|")
	type key struct{ server, rows string }
	cell := map[key]map[string]float64{}
	var servers []string
	for _, name := range order {
		if !strings.HasPrefix(name, "BenchmarkServersScale/") {
			continue
		}
		rs := runs[name]
		srv, rows := param(name, "server"), param(name, "rows")
		tr, _ := ratioOf(rs, "ttl/raw")
		tn, _ := ratioOf(rs, "ttl/naive")
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", srv, rows,
			medianOf(rs, "raw-ns/cell"), medianOf(rs, "naive-ns/cell"), medianOf(rs, "ttl-ns/cell"), tr, tn, medianOf(rs, "gc/op"))
		k := key{srv, rows}
		cell[k] = map[string]float64{}
		for _, impl := range []string{"raw", "naive", "ttl"} {
			if r, ok := ratioOf(rs, impl+"-ns/cell"); ok {
				cell[k][impl] = r.med
			}
		}
		cell[k]["ttl/raw"] = tr.med
		if g, ok := ratioOf(rs, "gc-cpu-ns/cell"); ok {
			if u, ok := ratioOf(rs, "user-cpu-ns/cell"); ok {
				cell[k]["gc share"] = g.med / (g.med + u.med)
			}
		}
		if len(servers) == 0 || servers[len(servers)-1] != srv {
			servers = append(servers, srv)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Growth from 10,000 to 100,000 rows. The absolute ns/cell of the two sizes are measured minutes apart, so under load their ratio mostly measures the load; the interleaved ttl/raw of each size is not, and its growth (100,000-row ttl/raw over the 10,000-row one) is the comparison that holds: <= 1 means ttl's per-cell cost grows no more than raw's. GC share is the process's GC CPU time over GC and Go code (runtime estimates, all impls together; `-` when not measured).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| server | raw growth | naive growth | ttl growth | ttl/raw growth (interleaved) | GC share 10,000 -> 100,000 | ttl grows no more than raw |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---|---|")
	for _, srv := range servers {
		small, large := cell[key{srv, "10000"}], cell[key{srv, "100000"}]
		if small == nil || large == nil {
			continue
		}
		g := func(impl string) float64 { return large[impl] / small[impl] }
		share := "-"
		if s0, ok := small["gc share"]; ok {
			share = fmt.Sprintf("%.0f%% -> %.0f%%", s0*100, large["gc share"]*100)
		}
		fmt.Fprintf(w, "| %s | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", srv, g("raw"), g("naive"), g("ttl"), g("ttl/raw"), share, okMissed(g("ttl/raw") <= 1))
	}
}

func main() {
	mainPath := flag.String("main", "", "output of the pair benchmarks")
	scalePath := flag.String("scale", "", "output of the scale benchmarks")
	interPath := flag.String("interleaved", "", "output of BenchmarkInterleaved")
	serversPath := flag.String("servers", "", "output of BenchmarkServers and BenchmarkServersScale")
	writesPath := flag.String("writes", "", "output of BenchmarkServersWrites")
	buildPath := flag.String("build", "", "output of BenchmarkInterleavedBuild")
	section := flag.String("section", "main", "table to print: main, filter, interleaved, scale, servers, serverscale (its scale part only), writes or build")
	flag.Parse()
	if *section == "serverscale" {
		f, err := os.Open(*serversPath)
		var runs map[string][]map[string]float64
		var order []string
		if err == nil {
			runs, order, err = serverRuns(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		serverScaleTable(os.Stdout, runs, order)
		return
	}
	if *section == "writes" || *section == "build" {
		path, table := *writesPath, writesTable
		if *section == "build" {
			path, table = *buildPath, buildTable
		}
		f, err := os.Open(path)
		if err == nil {
			err = table(os.Stdout, f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	path := *mainPath
	switch *section {
	case "scale":
		path = *scalePath
	case "interleaved":
		path = *interPath
	case "servers":
		path = *serversPath
	}
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer f.Close()
	if *section == "servers" {
		if err := serversTable(os.Stdout, f); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
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

// writesTable is BenchmarkServersWrites: raw, ttl (ttlclient.Mutation) and
// api (the TableAPI path) interleaved; targets ttl/raw <= 1.03 (issue 17)
// and api/ttl <= 1.05 (issue 18).
func writesTable(w io.Writer, r io.Reader) error {
	runs, order, err := runsWithPrefix(r, "BenchmarkServersWrites/")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| server | schema | op | raw ns/op | ttl ns/op | api ns/op | ttl/raw: median [min, max] | api/ttl: median [min, max] | api/raw: median [min, max] | ttl/raw <= 1.03 | api/ttl <= 1.05 |")
	fmt.Fprintln(w, "|---|---|---|---:|---:|---:|---|---|---|---|---|")
	for _, name := range order {
		rs := runs[name]
		tr, _ := ratioOf(rs, "ttl/raw")
		at, _ := ratioOf(rs, "api/ttl")
		ar, _ := ratioOf(rs, "api/raw")
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", param(name, "server"), param(name, "schema"), param(name, "op"),
			medianOf(rs, "raw-ns/op"), medianOf(rs, "ttl-ns/op"), medianOf(rs, "api-ns/op"), tr, at, ar, verdict(tr, 1.03), verdict(at, 1.05))
	}
	return nil
}

// buildTable is BenchmarkInterleavedBuild: the pure build of a 10-cell
// mutation by raw, ttl and api, with allocations per mutation; target
// ttl/raw <= 1.2 with at most 2 allocations more than raw (issue 17).
func buildTable(w io.Writer, r io.Reader) error {
	runs, order, err := runsWithPrefix(r, "BenchmarkInterleavedBuild/")
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "| strategy | raw ns/op | ttl ns/op | api ns/op | raw allocs | ttl allocs | api allocs | raw B/op | ttl B/op | api B/op | ttl/raw: median [min, max] | api/ttl: median [min, max] | ttl/raw <= 1.2, allocs <= raw+2 |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
	for _, name := range order {
		rs := runs[name]
		tr, _ := ratioOf(rs, "ttl/raw")
		at, _ := ratioOf(rs, "api/ttl")
		ra, _ := ratioOf(rs, "raw-allocs/op")
		ta, _ := ratioOf(rs, "ttl-allocs/op")
		v := verdict(tr, 1.2)
		if ta.med > ra.med+2 {
			v += "; allocs missed"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", param(name, "strategy"),
			medianOf(rs, "raw-ns/op"), medianOf(rs, "ttl-ns/op"), medianOf(rs, "api-ns/op"),
			medianOf(rs, "raw-allocs/op"), medianOf(rs, "ttl-allocs/op"), medianOf(rs, "api-allocs/op"),
			medianOf(rs, "raw-B/op"), medianOf(rs, "ttl-B/op"), medianOf(rs, "api-B/op"), tr, at, v)
	}
	return nil
}
