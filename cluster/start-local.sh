#!/usr/bin/env bash
# Start a single-node Ray head on 127.0.0.1 (with the job server), for `ray job submit`,
# with token authentication (the token file is RAY_AUTH_TOKEN_PATH, see env.sh).
#   cluster/start-local.sh [--num-cpus N]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=env.sh
source "$here/env.sh"
num_cpus="${NUM_CPUS:-$(nproc)}"
if [ "${1:-}" = "--num-cpus" ]; then num_cpus="$2"; fi
PY="${PY:-python3}"
RAY="$(dirname "$(command -v "$PY")")/ray"
[ -x "$RAY" ] || RAY="ray"
# the cluster's token: made once, readable by its owner only
if [ ! -s "$RAY_AUTH_TOKEN_PATH" ]; then
  mkdir -p "$(dirname "$RAY_AUTH_TOKEN_PATH")"
  (umask 077 && "$PY" -c 'import secrets; print(secrets.token_hex(32))' > "$RAY_AUTH_TOKEN_PATH")
fi
chmod 600 "$RAY_AUTH_TOKEN_PATH"
port="${RAY_GCS_PORT:-6379}"
failed=0
"$RAY" start --head --node-ip-address=127.0.0.1 --port="$port" \
  --dashboard-host=127.0.0.1 --dashboard-port="$RAY_DASHBOARD_PORT" --include-dashboard=true \
  --dashboard-agent-listen-port="${RAY_AGENT_PORT:-52365}" \
  --num-cpus="$num_cpus" --object-store-memory="${RAY_OBJECT_STORE_BYTES:-268435456}" \
  --temp-dir="$RAY_TEMP_DIR" --disable-usage-stats >/dev/null || failed=$?
# remember this head's session, so that stop-local.sh stops this cluster and no other
# (read from its own GCS server, not session_latest: heads started side by side, as
# parallel test workers do, would race for that link)
marker="$RAY_TEMP_DIR/tmem-eval-$port.session"
{ pgrep -af "gcs_server.*--gcs_server_port=$port( |$)" || true; } | grep -o 'session-name=[^ ]*' \
  | head -1 | cut -d= -f2 > "$marker" || true
if [ "$failed" != 0 ]; then  # what a failed start left running goes too
  if [ -s "$marker" ]; then "$here/stop-local.sh" >/dev/null || true; fi
  rm -f "$marker"
  echo "error: ray start failed (exit $failed); nothing of it is left running" >&2
  exit 1
fi
# The job server answers before its agent registers; a submitted no-op job proves both are up.
# Bounded in time, not attempts: a submit to a server whose agent never registered waits 10 s.
deadline=$((SECONDS + ${RAY_START_WAIT_S:-300}))
while [ "$SECONDS" -lt "$deadline" ]; do
  if "$RAY" job submit --address "$RAY_ADDRESS" --submission-id "warmup-$(date +%s%N)" \
      -- true >/dev/null 2>&1; then
    echo "ray head up: RAY_ADDRESS=$RAY_ADDRESS"
    exit 0
  fi
  sleep 1
done
echo "error: the Ray job server did not accept jobs on port $RAY_DASHBOARD_PORT within" \
  "${RAY_START_WAIT_S:-300} s (its agent's log: $RAY_TEMP_DIR/session_latest/logs/dashboard_agent.log)" >&2
exit 1
