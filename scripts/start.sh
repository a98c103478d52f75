#!/usr/bin/env bash
# `npm start`: installs dependencies, checks PostgreSQL and Redis, creates the database when
# missing, builds, applies migrations, then runs the API and the worker until Ctrl-C (or until one of
# them exits: the other is then stopped, and npm start exits with the first one's status).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
ensure_deps
# the env file the service reads (DOTENV_PATH, as src/config does; else ./.env)
envfile="${DOTENV_PATH:-.env}"
fresh_key() { node -e "console.log(require('crypto').randomBytes(32).toString('base64'))"; }
if [ -n "${KEY_ENCRYPTION_KEY:-}" ]; then
  : # set in the environment: it wins over any file, nothing to write
elif [ ! -f "$envfile" ]; then
  echo "creating $envfile with a fresh KEY_ENCRYPTION_KEY (keep it: it encrypts signing keys and secrets)"
  echo "KEY_ENCRYPTION_KEY=$(fresh_key)" > "$envfile"
# set in any spelling the loader and dotenv read (`export KEY=...`, leading blanks): never replaced
elif ! grep -Eq '^[[:space:]]*(export[[:space:]]+)?KEY_ENCRYPTION_KEY[[:space:]]*=' "$envfile"; then
  # on a line of its own, also after a last line without a newline
  [ -z "$(tail -c 1 "$envfile")" ] || echo >> "$envfile"
  echo "KEY_ENCRYPTION_KEY=$(fresh_key)" >> "$envfile"
fi
load_env
admin_url=$(node -e "const u=new URL(process.argv[1]); u.pathname='/postgres'; console.log(u.toString())" "$DATABASE_URL")
check_services "$admin_url"
node -e "
  const { Client } = require('pg');
  const target = new URL(process.argv[1]); const name = decodeURIComponent(target.pathname.slice(1));
  const c = new Client({ connectionString: process.argv[2] });
  c.connect()
    .then(() => c.query('SELECT 1 FROM pg_database WHERE datname = \$1', [name]))
    .then((r) => r.rowCount ? null : c.query('CREATE DATABASE \"' + name.replace(/\"/g, '') + '\"').then(() => console.log('created database ' + name)))
    .then(() => c.end())
    .catch((e) => { console.error('could not create database ' + name + ': ' + e.message); process.exit(1); });
" "$DATABASE_URL" "$admin_url"
echo "building..."; npm run build --silent
npm run migration:run --silent
echo "starting API on port ${PORT:-3001} and the worker (Ctrl-C stops both)"
run_pair "node dist/worker" "node dist/main"
