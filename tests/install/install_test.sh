#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, then builds and runs two consumers against
# the installed files only: one through find_package(tidegate), one through pkg-config.
set -euo pipefail
build_dir="$1"
source_dir="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir/tests/install/consumer" -B "$work/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
export LD_LIBRARY_PATH="$work/prefix/lib:${LD_LIBRARY_PATH:-}"
# A one-rank job: rank 0 serves the store on an ephemeral loopback port.
TIDEGATE_RANK=0 TIDEGATE_SIZE=1 TIDEGATE_STORE_ADDR=127.0.0.1:0 TIDEGATE_SECRET=install-test \
  "$work/consumer/consumer"

export PKG_CONFIG_PATH="$work/prefix/lib/pkgconfig"
pkg-config --exists tidegate
cc -std=c99 -Wall -Werror "$source_dir/tests/install/consumer/consumer_c.c" -o "$work/consumer_c" \
  $(pkg-config --cflags --libs tidegate)
"$work/consumer_c"
