#!/usr/bin/env bash
# Start dockerd in the background unless an engine already answers; wait (bounded) until `docker info` does.
# Usage: docker/start-dockerd.sh   (env: CASCADE_DOCKERD_LOG, default /tmp/cascade-dockerd.log;
#                                        CASCADE_DOCKERD_WAIT seconds, default 90)
set -euo pipefail

LOG="${CASCADE_DOCKERD_LOG:-/tmp/cascade-dockerd.log}"
WAIT="${CASCADE_DOCKERD_WAIT:-90}"

die() { echo "start-dockerd: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker CLI not found (apt-get install docker.io)"
if docker info >/dev/null 2>&1; then
  echo "start-dockerd: the docker engine already answers"
  exit 0
fi
command -v dockerd >/dev/null || die "dockerd not found (apt-get install docker.io)"
[[ "$(id -u)" == "0" ]] || die "dockerd must be started as root"

echo "start-dockerd: starting dockerd (log: $LOG)"
setsid nohup dockerd >"$LOG" 2>&1 &  # its own session: it outlives the shell or job that started it
pid=$!
for _ in $(seq "$WAIT"); do
  if docker info >/dev/null 2>&1; then
    echo "start-dockerd: the engine answers (dockerd pid $pid)"
    exit 0
  fi
  kill -0 "$pid" 2>/dev/null || { tail -n 20 "$LOG" >&2; die "dockerd exited during start-up (log: $LOG)"; }
  sleep 1
done
tail -n 20 "$LOG" >&2
die "dockerd did not answer within ${WAIT}s (log: $LOG)"
