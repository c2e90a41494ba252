#!/usr/bin/env bash
# Installs what tests/runtimes_test.ts runs on: Bun, workerd, TypeScript with
# @types/node, and the npm packages a Node user installs (hono,
# @hono/node-server, redis, ioredis, postgres), at the versions pinned in
# .ci/runtimes/package.json and its lock file, into .ci/.tools/runtimes.
# Node itself (20 or later) comes from the PATH. Idempotent: does nothing when
# the installed lock file is the pinned one.
set -euo pipefail
cd "$(dirname "$0")/.."

pinned=.ci/runtimes
tools=.ci/.tools/runtimes

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "Node 20+ and npm are needed on the PATH for the runtime tests" >&2
  exit 1
fi
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' || {
  echo "Node 20+ is needed for the runtime tests (found $(node --version))" >&2
  exit 1
}

if cmp -s "$pinned/package-lock.json" "$tools/.installed-lock.json" &&
  [ -x "$tools/node_modules/.bin/bun" ] && [ -x "$tools/node_modules/.bin/workerd" ]; then
  exit 0
fi
echo "Installing the runtime test tools into $tools"
mkdir -p "$tools"
cp "$pinned/package.json" "$pinned/package-lock.json" "$tools/"
npm ci --prefix "$tools" --no-audit --no-fund --loglevel=error
cp "$pinned/package-lock.json" "$tools/.installed-lock.json"
"$tools/node_modules/.bin/bun" --version >/dev/null
"$tools/node_modules/.bin/workerd" --version >/dev/null
