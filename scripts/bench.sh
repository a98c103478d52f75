#!/usr/bin/env bash
# `npm run bench`: builds, creates a fresh benchmark database, starts the API on port 3101 as two
# processes (the issue's setting; BENCH_API_WORKERS=1 for one, which does better on this 2-core
# host, see the README), runs bench/run.js (autocannon and the open-loop generator) and appends
# bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
: "${BENCH_ADMIN_URL:=postgres://postgres@127.0.0.1:5432/postgres}"
: "${REDIS_URL:=redis://127.0.0.1:6379}"
export BENCH_ADMIN_URL REDIS_URL
check_services "$BENCH_ADMIN_URL"
db="authp_bench_$(date +%s)"
psql "$BENCH_ADMIN_URL" -qc "CREATE DATABASE $db"
export DATABASE_URL="${BENCH_ADMIN_URL%/*}/$db"
export NODE_ENV=development LOG_LEVEL=warn PORT=3101 API_WORKERS="${BENCH_API_WORKERS:-2}" TRUST_PROXY=loopback
export REDIS_KEY_PREFIX="authp_bench_$(date +%s):" KEY_ENCRYPTION_KEY="$(node -e "console.log(require('crypto').randomBytes(32).toString('base64'))")"
export PUBLIC_BASE_URL=http://127.0.0.1:3101 DATABASE_POOL_SIZE=20
npm run build --silent
node dist/migrate
# BENCH_NODE_FLAGS: extra node flags for the API processes (e.g. --trace-gc while looking into tails)
# BENCH_CPU_PROFILE=<dir>: a V8 CPU profile of each API process per measured run (bench/run.js)
CPU_PROFILE_DIR="${BENCH_CPU_PROFILE:-}" node ${BENCH_NODE_FLAGS:-} dist/main & api=$!
cleanup() {
  kill $api 2>/dev/null || true; wait $api 2>/dev/null || true
  psql "$BENCH_ADMIN_URL" -qc "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  redis-cli -u "$REDIS_URL" --scan --pattern "${REDIS_KEY_PREFIX}*" | xargs -r -n 500 redis-cli -u "$REDIS_URL" del >/dev/null || true
}
trap cleanup EXIT
for _ in $(seq 1 60); do curl -sf http://127.0.0.1:3101/health >/dev/null && break; sleep 0.5; done
BENCH_URL=http://127.0.0.1:3101 BENCH_API_PID=$api node --expose-gc bench/run.js
