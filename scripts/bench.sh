#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: runs the raw-vs-ttlclient benchmarks (the
# sides interleaved in one process, on the in-process bttest server and on
# cbtemulator), compares them with benchstat, computes the ratios
# (scripts/benchreport) and takes CPU profiles.
#
#   scripts/bench.sh                # run everything (about 90 min on 2 busy cores)
#   RUN=0 scripts/bench.sh          # only rebuild BENCHMARKS.md from docs/bench/
#   PARTS=writes scripts/bench.sh   # run only the writes, TableAPI and scale
#                                   # benchmarks (issues 17, 18); keep the rest
#   PARTS=servers scripts/bench.sh  # run only the two-server read benchmarks (issue 17),
#                                   # keep the other outputs in docs/bench/
#   COUNT=10 scripts/bench.sh       # more runs per benchmark (default 6)
#   WCOUNT=10 scripts/bench.sh      # more runs of the writes part (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH)/bin"

COUNT=${COUNT:-6}
RUN=${RUN:-1}
PARTS=${PARTS:-"writes servers issue7"}
WCOUNT=${WCOUNT:-5}     # runs of each benchmark of the writes part
SCOUNT=${SCOUNT:-5}     # runs of BenchmarkServers
SCALECOUNT=${SCALECOUNT:-3} # runs of BenchmarkServersScale
OUT=docs/bench
mkdir -p "$OUT"

command -v benchstat >/dev/null || go install golang.org/x/perf/cmd/benchstat@latest

MAIN_CMD="go test ./ttlclient/ -run '^\$' -bench '^Benchmark(Apply|ApplyBulk|ReadRow|ReadRows|MutationBuild|ReadFilter)\$' -benchmem -count $COUNT -timeout 60m"
INTER_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkInterleaved(Build)?\$' -count $COUNT -timeout 60m"
SCALE_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkScale' -benchtime 1x -benchmem -count $COUNT -timeout 60m"
PROF_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkReadRows\$/strategy=default-expiry/impl=ttl' -benchtime 5x -cpuprofile $OUT/readrows-ttl.cpu -o $OUT/ttlclient.test"
PROF_SEQ_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkReadRows\$/strategy=sequence/impl=ttl' -benchtime 3x -cpuprofile $OUT/readrows-seq.cpu -o $OUT/ttlclient.test"
SERVERS_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$' -benchtime 3s -count $SCOUNT -timeout 120m"
SERVERS_SCALE_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$' -benchtime 5x -count $SCALECOUNT -timeout 120m"
PROF_SRV_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$/server=bttest/schema=sequence/op=ReadRows' -benchtime 5x -cpuprofile $OUT/servers-seq.cpu -o $OUT/ttlclient.test"
PROF_MUT_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkMutationBuild\$/strategy=default-expiry/impl=ttl' -benchtime 200000x -cpuprofile $OUT/mutation-ttl.cpu -o $OUT/ttlclient.test"

WRITES_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersWrites\$' -benchtime 2s -count $WCOUNT -timeout 120m"
BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkInterleavedBuild\$' -benchtime 1s -count $WCOUNT"
SCALE17_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$' -benchtime 3x -count $WCOUNT -timeout 120m"
PROF_BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkMutationBuild\$/strategy=default-expiry/impl=ttl' -benchtime 300000x -cpuprofile $OUT/build.cpu -o $OUT/ttlclient.test"
PROF_SCALE10K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=10000\$' -benchtime 3x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"
PROF_SCALE100K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=100000\$' -benchtime 3x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

machine() {
  echo "goarch: $(go env GOARCH)"
  echo "cpus: $(nproc)"
  echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "go: $(go env GOVERSION)"
  echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "commit: $(git rev-parse --short HEAD)"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

if [ "$RUN" = 1 ] && has writes; then
  eval "$BUILD_CMD" | tee "$OUT/build.txt"
  eval "$WRITES_CMD" | tee "$OUT/writes.txt"
  eval "$SCALE17_CMD" | tee "$OUT/scale-17.txt"
  eval "$PROF_BUILD_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/build.cpu" 2>/dev/null | head -40 > "$OUT/build.pprof.txt"
  eval "$PROF_SCALE10K_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/scale.cpu" 2>/dev/null | head -45 > "$OUT/scale-10k.pprof.txt"
  eval "$PROF_SCALE100K_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/scale.cpu" 2>/dev/null | head -45 > "$OUT/scale-100k.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
  machine > "$OUT/writes-machine.txt"
fi

if [ "$RUN" = 1 ] && has servers; then
  eval "$SERVERS_CMD" | tee "$OUT/servers.txt"
  eval "$SERVERS_SCALE_CMD" | tee -a "$OUT/servers.txt"
  eval "$PROF_SRV_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/servers-seq.cpu" 2>/dev/null | head -32 > "$OUT/servers-seq.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
  {
    echo "goarch: $(go env GOARCH)"
    echo "cpus: $(nproc)"
    echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "go: $(go env GOVERSION)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit: $(git rev-parse --short HEAD)"
    echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
  } > "$OUT/servers-machine.txt"
fi

if [ "$RUN" = 1 ] && has issue7; then
  eval "$INTER_CMD" | tee "$OUT/interleaved.txt"
  eval "$MAIN_CMD" | tee "$OUT/main.txt"
  eval "$SCALE_CMD" | tee "$OUT/scale.txt"
  eval "$PROF_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/readrows-ttl.cpu" 2>/dev/null | head -32 > "$OUT/readrows-ttl.pprof.txt"
  eval "$PROF_SEQ_CMD" > /dev/null
  go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/readrows-seq.cpu" 2>/dev/null | head -32 > "$OUT/readrows-seq.pprof.txt"
  eval "$PROF_MUT_CMD" > /dev/null
  go tool pprof -top "$OUT/ttlclient.test" "$OUT/mutation-ttl.cpu" 2>/dev/null | head -26 > "$OUT/mutation-ttl.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
  {
    echo "goarch: $(go env GOARCH)"
    echo "cpus: $(nproc)"
    echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
    echo "go: $(go env GOVERSION)"
    echo "date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit: $(git rev-parse --short HEAD)"
  } > "$OUT/machine.txt"
fi

benchstat -col /impl "$OUT/main.txt" > "$OUT/main.benchstat.txt"
benchstat -col /impl "$OUT/scale.txt" > "$OUT/scale.benchstat.txt"

report() { go run ./scripts/benchreport -main "$OUT/main.txt" -scale "$OUT/scale.txt" -interleaved "$OUT/interleaved.txt" -section "$1"; }

{
  cat <<TITLE
# Benchmarks: ttlclient against the raw client

Generated by \`scripts/bench.sh\` (do not edit by hand; the analysis comes
from the \`scripts/benchmarks-notes*.md\` files, the figures from the raw
outputs in \`docs/bench/\`).

TITLE
  cat <<W
## Writes, the TableAPI path and scale (issues 17 and 18)

\`\`\`sh
$BUILD_CMD
$WRITES_CMD
$SCALE17_CMD
go run ./scripts/benchreport -build docs/bench/build.txt -section build
go run ./scripts/benchreport -writes docs/bench/writes.txt -section writes
go run ./scripts/benchreport -servers docs/bench/scale-17.txt -section serverscale
$PROF_BUILD_CMD
$PROF_SCALE10K_CMD
$PROF_SCALE100K_CMD
\`\`\`

Machine (\`docs/bench/writes-machine.txt\`):

\`\`\`
$(cat "$OUT/writes-machine.txt")
\`\`\`

W
  cat scripts/benchmarks-notes-writes.md
  echo
  echo "### Pure build of a 10-cell mutation (no I/O), interleaved"
  echo
  go run ./scripts/benchreport -build "$OUT/build.txt" -section build
  echo
  echo "### Apply and ApplyBulk on both servers: raw, ttl (ttlclient.Mutation) and api (TableAPI path), interleaved"
  echo
  go run ./scripts/benchreport -writes "$OUT/writes.txt" -section writes
  echo
  echo "### ReadRows at 10,000 and 100,000 rows"
  echo
  go run ./scripts/benchreport -servers "$OUT/scale-17.txt" -section serverscale
  echo
  echo "Build + rewrite of a 10-cell mutation (ttl, default expiry), \`go tool pprof -top -cum\`:"
  echo
  echo '```'
  cat "$OUT/build.pprof.txt"
  echo '```'
  echo
  for size in 10k 100k; do
    echo "ReadRows at ${size} rows on bttest (raw, naive and ttl interleaved; the profile includes loading the rows), \`go tool pprof -top -cum\`:"
    echo
    echo '```'
    cat "$OUT/scale-${size}.pprof.txt"
    echo '```'
    echo
  done
  echo
  cat scripts/benchmarks-notes-idle.md
  echo
  cat <<S17
## Issue 17: both servers, the naive filter, single-family schemas

\`BenchmarkServers\` and \`BenchmarkServersScale\` run every operation through
the raw client unfiltered (raw), the raw client sending the filter a user
writes by hand from Bigtable's filter docs (naive:
\`Chain(FamilyFilter("^fam\$"), TimestampRange or CellsPerColumn)\` per managed
family and a \`FamilyFilter\` per unmanaged one, interleaved), and the
library (ttl): all three in every iteration, rotating which goes first, on
the in-process bttest server and on cbtemulator. Tables are opened with
verification, so the library sends the regex-free filter.

\`\`\`sh
$SERVERS_CMD
$SERVERS_SCALE_CMD
go run ./scripts/benchreport -servers docs/bench/servers.txt -section servers
$PROF_SRV_CMD
\`\`\`

Machine (\`docs/bench/servers-machine.txt\`):

\`\`\`
$(cat "$OUT/servers-machine.txt")
\`\`\`

S17
  cat scripts/benchmarks-notes-17.md
  echo
  go run ./scripts/benchreport -servers "$OUT/servers.txt" -section servers
  echo
  cat <<S17END
ReadRows through the library on a sequence family alone (bttest), \`go tool pprof -top -cum\`:

\`\`\`
$(cat "$OUT/servers-seq.pprof.txt")
\`\`\`

$(cat scripts/benchmarks-notes-17-writes.md)

# Issue 7: the pairs, the pure paths and the first scale runs

Everything below was measured at commit $(sed -n 's/^commit: //p' "$OUT/machine.txt"), before the
regex-free filter of issue 17 (the read figures are the old filter's);
\`PARTS=issue7 scripts/bench.sh\` reruns it.

S17END
  cat <<HDR
## How they were run

Both sides run in one process against one in-process bttest server, on the
same table and the same data.

- \`BenchmarkInterleaved\` gives the end-to-end ratios: every iteration runs
  the operation once through the raw \`*bigtable.Table\` and once through the
  \`ttlclient.Table\`, alternating which goes first, and times each; it
  reports raw-ns/op, ttl-ns/op and ttl/raw for the whole run. Both sides see
  the same machine within a millisecond, which matters here (below).
- The other benchmarks are pairs of sub-benchmarks \`impl=raw\` and
  \`impl=ttl\` (reads also \`impl=rawfilter\`: the raw client sending, by
  hand, the same TTL filter the library sends), for benchstat and for
  B/op and allocs/op. \`go test -count\` repeats each sub-benchmark
  $COUNT times in a row, so these runs are not interleaved: their time
  ratios are ratios of medians and weaker evidence than the interleaved ones.

\`\`\`sh
$INTER_CMD
$MAIN_CMD
$SCALE_CMD
benchstat -col /impl docs/bench/main.txt
$PROF_CMD
go tool pprof -top -cum docs/bench/ttlclient.test docs/bench/readrows-ttl.cpu
\`\`\`

Machine (\`docs/bench/machine.txt\`):

\`\`\`
$(cat "$OUT/machine.txt")
\`\`\`

The machine is a shared 2-core VM on which four other builds and test runs
were going on at the same time: absolute times are noisy (the same raw
benchmark varied by 2x or more between runs), which is why the end-to-end
ratios come from the interleaved benchmark: the table gives the median of
the $COUNT runs' ratios and their range [min, max]. Allocation counts are
exact and do not depend on load.

HDR
  cat scripts/benchmarks-notes.md
  echo
  echo "## End-to-end ratios (interleaved)"
  echo
  report interleaved
  echo
  echo "## Results: each pair"
  echo
  report main
  echo
  echo "## Reads: the wrapper against the raw client sending the same filter"
  echo
  echo "Separates the cost of the library from the cost of filtering on the server."
  echo
  report filter
  echo
  echo "## Scale"
  echo
  echo "ApplyBulk of rows of 10 cells (default-expiry family), ReadRows of rows of 1 cell. ns/cell is ns/op over the cells per op; peak heap is the largest live heap sampled every millisecond during the benchmark, whole process (the in-process server's memory included)."
  echo
  report scale
  echo
  echo "## benchstat"
  echo
  echo '```'
  cat "$OUT/main.benchstat.txt"
  echo '```'
  echo
  echo '```'
  cat "$OUT/scale.benchstat.txt"
  echo '```'
  echo
  echo "## Profiles"
  echo
  echo "ReadRows through the library (1,000 rows x 10 cells, default expiry), \`go tool pprof -top -cum\`:"
  echo
  echo '```'
  cat "$OUT/readrows-ttl.pprof.txt"
  echo '```'
  echo
  echo "ReadRows through the library on a sequence family (plain form: the unmanaged-family regex is compiled by the emulator for every cell), \`go tool pprof -top -cum\`:"
  echo
  echo '```'
  cat "$OUT/readrows-seq.pprof.txt"
  echo '```'
  echo
  echo "Mutation build + rewrite (10 cells), \`go tool pprof -top\`:"
  echo
  echo '```'
  cat "$OUT/mutation-ttl.pprof.txt"
  echo '```'
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
