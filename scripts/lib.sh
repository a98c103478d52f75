#!/usr/bin/env bash
# Shared by start.sh and test.sh: checks that PostgreSQL and Redis answer at the configured URLs
# and says precisely what to do when they do not.
set -euo pipefail

# Sources .env like the service's own loader (dotenv without override): a variable already in the
# environment wins over .env, so `PORT=4000 npm start` listens on 4000 whatever .env says.
load_env() {
  # DOTENV_PATH, as src/config reads it; else ./.env
  local __env_file="${DOTENV_PATH:-.env}"
  if [ -f "$__env_file" ]; then
    local -A __env_kept=()
    local __env_name
    for __env_name in $(compgen -e); do __env_kept[$__env_name]=${!__env_name}; done
    # shellcheck disable=SC1090
    set -a; . "$(cd "$(dirname "$__env_file")" && pwd)/$(basename "$__env_file")"; set +a
    for __env_name in "${!__env_kept[@]}"; do
      [ "${!__env_name-}" = "${__env_kept[$__env_name]}" ] || export "$__env_name=${__env_kept[$__env_name]}"
    done
  fi
  : "${DATABASE_URL:=postgres://postgres@127.0.0.1:5432/authp}"
  : "${REDIS_URL:=redis://127.0.0.1:6379}"
  export DATABASE_URL REDIS_URL
}

check_services() {
  local pg_admin_url="$1"
  if ! node -e "
    const { Client } = require('pg');
    const c = new Client({ connectionString: process.argv[1], connectionTimeoutMillis: 3000 });
    c.connect().then(() => c.end()).catch((e) => { console.error(e.message); process.exit(1); });
  " "$pg_admin_url" >/dev/null 2>/tmp/authp-pg-check.err; then
    echo "PostgreSQL is not reachable at ${pg_admin_url%%\?*} ($(cat /tmp/authp-pg-check.err))." >&2
    echo "  Start it:   pg_ctlcluster --skip-systemctl-redirect \"\$(ls /etc/postgresql | sort -V | tail -1)\" main start" >&2
    echo "  Install it: apt-get install -y postgresql" >&2
    echo "          or: docker compose -f docker/compose.yaml --env-file .env up -d postgres" >&2
    echo "              (compose requires KEY_ENCRYPTION_KEY, SMTP_URL, EMAIL_FROM, PUBLIC_BASE_URL and ACCOUNTS_URL in .env, even for this)" >&2
    echo "  Or point DATABASE_URL (in .env) at a server you have." >&2
    exit 1
  fi
  if ! node -e "
    const Redis = require('ioredis');
    const r = new Redis(process.argv[1], { lazyConnect: true, maxRetriesPerRequest: 0, connectTimeout: 3000, retryStrategy: () => null });
    let cause; // kept for the message; unhandled, ioredis prints an 'Unhandled error event' stack trace
    r.on('error', (e) => { cause = cause || e; });
    r.connect().then(() => r.ping()).then(() => r.quit()).catch((e) => { console.error((cause || e).message); process.exit(1); });
  " "$REDIS_URL" >/dev/null 2>/tmp/authp-redis-check.err; then
    local redis_port
    redis_port=$(node -e "try { console.log(new URL(process.argv[1]).port || 6379) } catch { console.log(6379) }" "$REDIS_URL")
    echo "Redis is not reachable at $REDIS_URL ($(cat /tmp/authp-redis-check.err))." >&2
    echo "  Start it:   redis-server --daemonize yes --bind 127.0.0.1 --port $redis_port --save \"\" --appendonly no" >&2
    echo "  Install it: apt-get install -y redis-server" >&2
    echo "          or: docker compose -f docker/compose.yaml --env-file .env up -d redis" >&2
    echo "              (compose requires KEY_ENCRYPTION_KEY, SMTP_URL, EMAIL_FROM, PUBLIC_BASE_URL and ACCOUNTS_URL in .env, even for this;" >&2
    echo "              it publishes Redis on REDIS_HOST_PORT, default 6379)" >&2
    echo "  Or point REDIS_URL (in .env) at a server you have." >&2
    exit 1
  fi
}

ensure_deps() {
  if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    echo "installing dependencies (npm ci)..."
    npm ci --no-audit --no-fund
  fi
}

# Runs two command lines (word-split, no quoting) side by side until one of them exits or INT/TERM
# arrives, then stops the other and returns the first one's exit status: an API that crashes (or
# is killed) must not leave the worker running unattended, nor the other way round.
run_pair() {
  (exec $1) & _pair_a=$!
  (exec $2) & _pair_b=$!
  trap 'kill $_pair_a $_pair_b 2>/dev/null' INT TERM
  local code=0
  wait -n $_pair_a $_pair_b || code=$?
  kill $_pair_a $_pair_b 2>/dev/null || true
  wait $_pair_a $_pair_b 2>/dev/null || true
  trap - INT TERM
  return $code
}
