# Settings for a Ray cluster on loopback (source this file).
# Token authentication: every client (ray job submit, a driver, the dashboard's API) must
# present the token in RAY_AUTH_TOKEN_PATH, which start-local.sh creates (mode 0600).
export RAY_AUTH_MODE=token
export RAY_AUTH_TOKEN_PATH="${RAY_AUTH_TOKEN_PATH:-$HOME/.ray/tmem-eval-token}"
export RAY_USAGE_STATS_ENABLED=0
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0   # without it Ray advertises a non-loopback address
export RAY_DASHBOARD_PORT="${RAY_DASHBOARD_PORT:-8265}"
# The head's own folder for sessions and sockets. Heads side by side on one machine need one
# each: a job's entrypoint joins the cluster that last started in its head's folder.
export RAY_TEMP_DIR="${RAY_TEMP_DIR:-/tmp/ray}"
export RAY_ADDRESS="${RAY_ADDRESS:-http://127.0.0.1:${RAY_DASHBOARD_PORT}}"
