#!/usr/bin/env bash
# Server soak test (issue 29; not in scripts/test.sh): 64 streaming clients with random
# disconnects, 200 slow/idle connections and malformed requests against `oxinfer serve` for
# --duration seconds (default 600); prints the numbers as one JSON line and PASS, exit 1 on a
# failed bound (tests/soak/server_soak.mjs says which). Needs the release build (scripts/setup.sh).
#   scripts/soak.sh [--duration S] [--clients N] [--idle N]
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/release
[ -x "$B/apps/cli/oxinfer" ] && [ -x "$B/tools/gen/oxi-gen" ] || { echo "error: build first (scripts/setup.sh)" >&2; exit 1; }
SHARED="${OXI_SHARED_DIR:-$(cd .. && pwd)/shared}"
OXINFER="$PWD/$B/apps/cli/oxinfer" OXI_GEN="$PWD/$B/tools/gen/oxi-gen" NLC_DIR="$PWD/tools/node" OXI_SHARED_DIR="$SHARED" \
  OXI_WORK_DIR="${OXI_WORK_DIR:-/tmp/oxi-soak}" node tests/soak/server_soak.mjs "$@"
