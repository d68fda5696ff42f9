#!/usr/bin/env bash
# Stop the local Ray head started by start-local.sh (only that one: other clusters on the
# machine are left alone), or every Ray process here when its session is unknown.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=env.sh
source "$here/env.sh"
marker="$RAY_TEMP_DIR/tmem-eval-${RAY_GCS_PORT:-6379}.session"
if [ -s "$marker" ]; then
  session="$(cat "$marker")"
  pkill -TERM -f "$session" 2>/dev/null || true
  sleep 3
  pkill -KILL -f "$session" 2>/dev/null || true
  rm -f "$marker"
else
  PY="${PY:-python3}"
  RAY="$(dirname "$(command -v "$PY")")/ray"
  [ -x "$RAY" ] || RAY="ray"
  "$RAY" stop --force >/dev/null 2>&1 || true
fi
echo "ray stopped"
