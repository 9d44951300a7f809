#!/usr/bin/env bash
# GPU smoke run of the tools: tunes the `ids` suite into a fresh cache, then writes the report, an
# export, the listing and the verification next to the logs.
#
# usage: bench/run_tools_gpu.sh OUT_DIR [BUILD_DIR] [extra kvtune-tune arguments...]
#   e.g. bench/run_tools_gpu.sh /tmp/tools-h200 build --isolate
# Leaves in OUT_DIR: cache.sqlite, tune-ids.log, tune-ids.json, list.txt, verify.txt, export.json,
# report.html. Exit status: kvtune-tune's (0 all tuned, 1 a failure), or verify's when that fails.
set -euo pipefail
out=${1:?usage: run_tools_gpu.sh OUT_DIR [BUILD_DIR] [kvtune-tune arguments...]}
build=${2:-build}
shift $(( $# >= 2 ? 2 : 1 ))
tools="$build/tools"
mkdir -p "$out"
cache="$out/cache.sqlite"

set +e
"$tools/kvtune-tune" --suite ids --cache "$cache" "$@" 2>&1 | tee "$out/tune-ids.log"
status=${PIPESTATUS[0]}
set -e
# The same run again, as JSON: every problem is skipped now (resume), and the file records them.
"$tools/kvtune-tune" --suite ids --cache "$cache" --json "$@" > "$out/tune-ids.json" || true

"$tools/kvtune-cache" list --cache "$cache" | tee "$out/list.txt"
"$tools/kvtune-cache" export "$out/export.json" --cache "$cache"
"$tools/kvtune-cache" report --html "$out/report.html" --cache "$cache"
set +e
"$tools/kvtune-cache" verify --cache "$cache" > "$out/verify.txt" 2>&1
verify=$?
set -e
cat "$out/verify.txt"
if [ "$status" -ne 0 ]; then exit "$status"; fi
exit "$verify"
