#!/usr/bin/env bash
# `npm test`: lint, typecheck, unit tests, then e2e tests against real PostgreSQL and Redis
# (a fresh database per run, created, migrated and dropped by test/setup).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
: "${TEST_ADMIN_DATABASE_URL:=postgres://postgres@127.0.0.1:5432/postgres}"
: "${REDIS_URL:=redis://127.0.0.1:6379}"
export TEST_ADMIN_DATABASE_URL REDIS_URL
check_services "$TEST_ADMIN_DATABASE_URL"
echo "== lint"; npx eslint "src/**/*.ts" "test/**/*.ts" "migrations/**/*.ts"
echo "== typecheck"; npx tsc -p tsconfig.json --noEmit
echo "== unit"; npx jest --config jest.unit.config.js --passWithNoTests
echo "== e2e"; npx jest --config jest.e2e.config.js "$@"
