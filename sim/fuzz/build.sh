#!/bin/sh
# Builds and runs the scenario-parser fuzzer (clang 14 libFuzzer + ASan/UBSan); not part of CI.
#   sim/fuzz/build.sh [BUILD_DIR] [SECONDS]
# BUILD_DIR is an existing CMake build of the project (for the generated embedded-data source).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build-sim}" && pwd)
secs=${2:-180}
out=$build/fuzz
mkdir -p "$out/corpus"
cp "$root/sim/data/"*.json "$out/corpus/"
clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" -o "$out/scenario_fuzz" "$root/sim/fuzz/scenario_fuzz.cpp" "$root/sim/scenario.cpp" \
  "$root/sim/router/router.cpp" "$root/sim/engine/worker.cpp" "$root/sim/scheduler/"*.cpp \
  "$root/common/"*.cpp "$build/common/embedded_data.cpp" "$root/hwmodels/catalog.cpp" "$root/workloads/"*.cpp
cd "$out" && ./scenario_fuzz -max_total_time="$secs" -max_len=4096 "$out/corpus"
