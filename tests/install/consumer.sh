#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds + runs a consumer project against it
# (and a LeakSanitizer-linked program: the allocator cache must not count as leaked).
# Usage: consumer.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
[ -f "$tmp/prefix/lib/cmake/leanback/leanbackConfig.cmake" ] || { echo "FAIL: no package config"; exit 1; }
# The consumer uses the build's compilers (a clang sanitizer build's library needs clang's
# runtimes at link time).
cc="$(sed -n 's/^CMAKE_C_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")"
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
      -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release > "$tmp/configure.log" || { cat "$tmp/configure.log"; exit 1; }
cmake --build "$tmp/consumer" > "$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; exit 1; }
"$tmp/prefix/bin/leanback" info > /dev/null || { echo "FAIL: the installed leanback does not run"; exit 1; }
"$tmp/consumer/cache_not_leaked" || { echo "FAIL: LeakSanitizer reported leaks at exit"; exit 1; }
"$tmp/consumer/consumer"
