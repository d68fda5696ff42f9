#!/usr/bin/env bash
# Stop the local Ray head started by start-local.sh with the same settings (RAY_TEMP_DIR,
# RAY_GCS_PORT) and every process it started: its servers, agents, workers and their children.
# Other clusters on the machine, and drivers that only joined this one, are left alone.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=env.sh
source "$here/env.sh"
marker="$RAY_TEMP_DIR/tmem-eval-${RAY_GCS_PORT:-6379}.session"
if [ ! -s "$marker" ]; then
  echo "error: no head of start-local.sh to stop: $marker is missing (set RAY_TEMP_DIR and" \
       "RAY_GCS_PORT as when it started); nothing stopped" >&2
  exit 1
fi
session="$(cat "$marker")"
session_dir="$RAY_TEMP_DIR/$session"

# alive and not a zombie (the state follows the command name's closing parenthesis)
running() {
  local state
  state="$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)"
  [ -n "$state" ] && [ "$state" != Z ]
}

# The head's processes: those naming its session on their command line (GCS, raylet,
# dashboard, monitors), those writing into its session folder (the client server, the agents,
# workers, and their children even once orphaned; not a driver that joined it, whose only files
# there are its core worker's log and event files), and the descendants of both (the
# dashboard's modules).
own_pids() {
  local table pid seeds=""
  table="$(ps -eo pid=,ppid=,args=)"
  for pid in $(awk '{print $1}' <<<"$table"); do
    [ "$pid" = "$$" ] && continue
    if find "/proc/$pid/fd" -maxdepth 1 -lname "$session_dir/*" \
        ! -lname "*/python-core-driver-*" ! -lname "*/events/event_CORE_WORKER_*" \
        ! -lname "*/export_events/*" 2>/dev/null | grep -q .; then
      seeds="$seeds $pid"
    fi
  done
  awk -v session="$session" -v seeds="$seeds" -v self="$$" '
    { ppid[$1] = $2; if ($1 != self && index($0, session)) own[$1] = 1 }
    END {
      n = split(seeds, s, " "); for (i = 1; i <= n; i++) own[s[i]] = 1
      do { grew = 0; for (p in ppid) if (!(p in own) && (ppid[p] in own)) { own[p] = 1; grew = 1 } }
      while (grew)
      for (p in own) if (p in ppid) print p
    }' <<<"$table"
}

pids="$(own_pids)"
if [ -n "$pids" ]; then
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 1 6); do  # 3 s to exit on their own
    alive=""
    for pid in $pids; do running "$pid" && alive="$alive $pid"; done
    [ -z "$alive" ] && break
    sleep 0.5
  done
  # shellcheck disable=SC2086
  [ -n "$alive" ] && kill -KILL $alive 2>/dev/null || true
  # a worker may have started a child between the two looks: take it as well
  late="$(own_pids)"
  # shellcheck disable=SC2086
  [ -n "$late" ] && kill -KILL $late 2>/dev/null || true
fi
rm -f "$marker"
echo "ray stopped (session $session, $(wc -w <<<"$pids") processes)"
