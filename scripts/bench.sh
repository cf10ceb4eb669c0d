#!/usr/bin/env bash
# Regenerates BENCHMARKS.md: runs the raw-vs-ttlclient benchmarks (the
# sides interleaved in one process, on the in-process bttest server and on
# cbtemulator), computes the ratios (scripts/benchreport) and takes CPU
# profiles. Run it on an otherwise idle machine: the interleaving makes the
# ratios fair under load, not precise.
#
#   scripts/bench.sh               # run everything (about 40 min on an idle 2-core machine)
#   RUN=0 scripts/bench.sh         # only rebuild BENCHMARKS.md from docs/bench/
#   PARTS=writes scripts/bench.sh  # only the writes: pure build, Apply and
#                                  # ApplyBulk (Mutation and TableAPI paths), scale
#   PARTS=reads scripts/bench.sh   # only the reads on both servers
#   COUNT=10 scripts/bench.sh      # more runs per benchmark (default 5)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH)/bin"

RUN=${RUN:-1}
PARTS=${PARTS:-"writes reads"}
OUT=docs/bench
mkdir -p "$OUT"
# Rebuilding the report only (RUN=0), the commands shown carry the count
# the outputs were made with.
if [ "$RUN" = 0 ] && [ -z "${COUNT:-}" ]; then
  COUNT=$(sed -n 's/^count: //p' "$OUT/writes-machine.txt" 2>/dev/null)
fi
COUNT=${COUNT:-5}

BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkInterleavedBuild\$' -benchtime 1s -count $COUNT"
WRITES_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersWrites\$' -benchtime 2s -count $COUNT -timeout 120m"
SCALE_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$' -benchtime 3x -count $COUNT -timeout 120m"
TABLEAPI_BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkTableAPIBuild\$' -benchtime 1s -count $COUNT -benchmem"
READS_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$' -benchtime 3s -count $COUNT -timeout 120m"
PROF_BUILD_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkMutationBuild\$/strategy=default-expiry/impl=ttl' -benchtime 300000x -cpuprofile $OUT/build.cpu -o $OUT/ttlclient.test"
PROF_BULK_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersWrites\$/server=bttest/schema=4-family/op=ApplyBulk' -benchtime 10s -cpuprofile $OUT/bulk.cpu -o $OUT/ttlclient.test"
PROF_SCALE10K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=10000\$' -benchtime 30x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"
PROF_SCALE100K_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServersScale\$/server=bttest/rows=100000\$' -benchtime 3x -cpuprofile $OUT/scale.cpu -o $OUT/ttlclient.test"
PROF_READS_CMD="go test ./ttlclient/ -run '^\$' -bench '^BenchmarkServers\$/server=bttest/schema=4-family/op=ReadRows' -benchtime 5x -cpuprofile $OUT/reads.cpu -o $OUT/ttlclient.test"

has() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }

machine() {
  echo "goarch: $(go env GOARCH)"
  echo "cpus: $(nproc)"
  echo "model: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "go: $(go env GOVERSION)"
  echo "count: $COUNT"
  echo "commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . ':!docs/bench' ':!BENCHMARKS.md' ':!scripts/benchmarks-notes-*.md' || echo ' (with uncommitted changes)')"
  echo "from: $1"
  echo "to: $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
}

top() { go tool pprof -top -cum "$OUT/ttlclient.test" "$OUT/$1.cpu" 2>/dev/null | head -"$2"; }

if [ "$RUN" = 1 ] && has writes; then
  start=$(date -u +%Y-%m-%dT%H:%MZ)
  eval "$BUILD_CMD" | tee "$OUT/build.txt"
  eval "$WRITES_CMD" | tee "$OUT/writes.txt"
  eval "$SCALE_CMD" | tee "$OUT/scale.txt"
  eval "$TABLEAPI_BUILD_CMD" | tee "$OUT/tableapi-build.txt"
  machine "$start" > "$OUT/writes-machine.txt"
  eval "$PROF_BUILD_CMD" > /dev/null
  top build 40 > "$OUT/build.pprof.txt"
  eval "$PROF_BULK_CMD" > /dev/null
  top bulk 30 > "$OUT/bulk.pprof.txt"
  # Each side's own CPU: the closures of BenchmarkServersWrites' ApplyBulk
  # are func1.1.4.1 (raw), .2 (ttl) and .3 (api), in source order.
  for side in 1:raw 2:ttl 3:api; do
    echo "== ${side#*:}: go tool pprof -top -cum -focus 'BenchmarkServersWrites.func1.1.4.${side%%:*}\$'"
    go tool pprof -top -cum -focus "BenchmarkServersWrites.func1.1.4.${side%%:*}\$" "$OUT/ttlclient.test" "$OUT/bulk.cpu" 2>/dev/null |
      grep -E "func1.1.4.${side%%:*}\$|Mutation\)\.Set|Mutation\)\.record|Table\)\.Timestamp|ttlclient\.\(\*Table\)\.(ApplyBulk|build|convert)|tableAPI\.ApplyBulk|bigtable\.\(\*Table\)\.ApplyBulk\$|Mutation\)$" || true
  done > "$OUT/bulk-sides.txt"
  eval "$PROF_SCALE10K_CMD" > /dev/null
  top scale 45 > "$OUT/scale-10k.pprof.txt"
  eval "$PROF_SCALE100K_CMD" > /dev/null
  top scale 45 > "$OUT/scale-100k.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
fi

if [ "$RUN" = 1 ] && has reads; then
  start=$(date -u +%Y-%m-%dT%H:%MZ)
  eval "$READS_CMD" | tee "$OUT/reads.txt"
  machine "$start" > "$OUT/reads-machine.txt"
  eval "$PROF_READS_CMD" > /dev/null
  top reads 40 > "$OUT/reads.pprof.txt"
  rm -f "$OUT/ttlclient.test" "$OUT"/*.cpu
fi

report() { go run ./scripts/benchreport "$@"; }

{
  cat <<TITLE
# Benchmarks: ttlclient against the raw client

Generated by \`scripts/bench.sh\` (do not edit by hand: the analysis comes
from the \`scripts/benchmarks-notes-*.md\` files, the figures from the raw
outputs in \`docs/bench/\`).

TITLE
  cat scripts/benchmarks-notes-summary.md
  cat <<HOW

## How they are run

Every benchmark runs its sides in one loop, in one process, against one
server (the in-process \`bttest\` and the gcloud \`cbtemulator\`, each in
turn), rotating which side goes first, and times each side: raw is the
plain \`*bigtable.Table\`, ttl the library's \`ttlclient.Table\` with its
\`Mutation\`, api the library through \`Table.API()\` with the client's own
\`*bigtable.Mutation\` (its timestamps from \`Table.Timestamp\`), naive the
plain client sending the filter a user writes by hand from Bigtable's docs
(\`Chain(FamilyFilter("^fam\$"), TimestampRange or CellsPerColumn)\` per
managed family and a \`FamilyFilter\` per unmanaged one, interleaved). Each
side builds its mutations inside the timed call, as a caller would. The
tables give, per benchmark, the median of the $COUNT runs' ratios with their
range [min, max]; the ns/op columns are medians of the runs.

\`\`\`sh
$BUILD_CMD
$WRITES_CMD
$SCALE_CMD
$TABLEAPI_BUILD_CMD
$READS_CMD
go run ./scripts/benchreport -build docs/bench/build.txt -section build
go run ./scripts/benchreport -writes docs/bench/writes.txt -section writes
go run ./scripts/benchreport -servers docs/bench/scale.txt -section serverscale
go run ./scripts/benchreport -servers docs/bench/reads.txt -section servers
\`\`\`

Machine and times of the writes and scale runs (\`docs/bench/writes-machine.txt\`):

\`\`\`
$(cat "$OUT/writes-machine.txt")
\`\`\`

Of the reads (\`docs/bench/reads-machine.txt\`):

\`\`\`
$(cat "$OUT/reads-machine.txt")
\`\`\`

## Writes

### Pure build of a 10-cell mutation (no I/O)

HOW
  report -build "$OUT/build.txt" -section build
  echo
  if [ -f "$OUT/build-before.txt" ]; then
    echo "Before the cells were recorded as the protos sent: commit $(sed -n 's/^# commit \([0-9a-f]*\).*/\1/p' "$OUT/build-before.txt"), the same machine and benchmark, which then reported no bytes (\`docs/bench/build-before.txt\`):"
    echo
    report -build "$OUT/build-before.txt" -section build
    echo
  fi
  echo "### bttl's own work before the RPC, 10 cells, the mutation built once outside the loop"
  echo
  echo "\`BenchmarkTableAPIBuild\`: what \`Apply\` does before its RPC on each path (\`impl=ttl\`: a built \`ttlclient.Mutation\`'s first \`Apply\`; \`impl=ttl-again\`, in runs after issue 30: one applied again, its cells built anew; \`impl=api\`: a built \`*bigtable.Mutation\` through \`Table.API()\`), without the caller's build or the server (\`docs/bench/tableapi-build.txt\`):"
  echo
  echo '\`\`\`sh'
  echo "$TABLEAPI_BUILD_CMD"
  echo '\`\`\`'
  echo
  echo '\`\`\`'
  grep '^Benchmark' "$OUT/tableapi-build.txt" | sed 's/[[:space:]]\+/ /g'
  echo '\`\`\`'
  echo
  echo "### Apply (1 row x 10 cells) and ApplyBulk (100 rows x 10 cells) on both servers"
  echo
  report -writes "$OUT/writes.txt" -section writes
  echo
  cat scripts/benchmarks-notes-writes.md
  echo
  echo "## Reads on both servers"
  echo
  echo "ReadRow (one row of 10 cells), ReadRows (1,000 rows of 10 cells) and, as a check of the write path, ApplyBulk (100 rows of 10 cells)."
  echo
  report -servers "$OUT/reads.txt" -section servers
  echo
  cat scripts/benchmarks-notes-reads.md
  echo
  echo "## Scale: ReadRows at 10,000 and 100,000 rows"
  echo
  report -servers "$OUT/scale.txt" -section serverscale
  echo
  cat scripts/benchmarks-notes-scale.md
  cat <<PROF

## Profiles

\`go tool pprof -top -cum\` of each command, first lines.

Build and rewrite of a 10-cell mutation (ttl, default expiry):

\`\`\`sh
$PROF_BUILD_CMD
\`\`\`

\`\`\`
$(cat "$OUT/build.pprof.txt")
\`\`\`

ApplyBulk of 100 x 10 on bttest, 4-family schema, raw, ttl and api interleaved,
and each side's own CPU (\`docs/bench/bulk-sides.txt\`):

\`\`\`sh
$PROF_BULK_CMD
\`\`\`

\`\`\`
$(cat "$OUT/bulk.pprof.txt")
\`\`\`

\`\`\`
$(cat "$OUT/bulk-sides.txt")
\`\`\`

ReadRows of 1,000 x 10 on bttest, 4-family schema, raw, naive and ttl interleaved:

\`\`\`sh
$PROF_READS_CMD
\`\`\`

\`\`\`
$(cat "$OUT/reads.pprof.txt")
\`\`\`

ReadRows at 10,000 and 100,000 rows on bttest (raw, naive and ttl; the profile includes loading the rows):

\`\`\`sh
$PROF_SCALE10K_CMD
$PROF_SCALE100K_CMD
\`\`\`

\`\`\`
$(cat "$OUT/scale-10k.pprof.txt")
\`\`\`

\`\`\`
$(cat "$OUT/scale-100k.pprof.txt")
\`\`\`

## Earlier measurements

Measurements of earlier code (issue 7's pairs, the split filter, the
write path before its cells were recorded as the protos sent) are in the
history of this file: \`git log -p -- BENCHMARKS.md\`.
PROF
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
