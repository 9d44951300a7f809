#!/usr/bin/env bash
# Installs kvtune from a build folder into a temporary prefix, builds tests/consumer against it
# with find_package(kvtune), and runs it.
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/kvtune/kvtune.h"
# The compile worker where the installed library looks for it (core/compile_workers.h: ../libexec/kvtune/).
test -x "$work/prefix/libexec/kvtune/kvtune-compile-worker"
cmake -S "$source_dir/tests/consumer" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" > "$work/configure.log"
cmake --build "$work/build" > "$work/build.log"
HOME="$work" "$work/build/consumer"
