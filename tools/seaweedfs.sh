#!/usr/bin/env bash
# SeaweedFS, the S3-compatible object store the S3 backend's tests run against.
#
#   tools/seaweedfs.sh build        build `weed` once per machine into the cache (about 12 min cold)
#   tools/seaweedfs.sh path         print the cached binary's path (exit 1 when it is not built)
#   tools/seaweedfs.sh start DIR    start a server on 127.0.0.1 with its data and state in DIR;
#                                   prints the S3 endpoint once it answers
#   tools/seaweedfs.sh stop DIR     stop the server started in DIR
#
# The module comes from the Go module proxy; `go install` refuses it (its go.mod has replace
# directives), so it is built with `go build ./weed` in a writable copy of the module.
# start reads CK_S3_ACCESS_KEY / CK_S3_SECRET_KEY for the one identity it allows (defaults are
# test-only values) and CK_S3_BUCKET for a bucket to create.
set -euo pipefail

SEAWEEDFS_VERSION=v0.0.0-20261109003541-7506e5f91cd6
MODULE=github.com/seaweedfs/seaweedfs
CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/ctxkeel/seaweedfs-$SEAWEEDFS_VERSION"
WEED="$CACHE_DIR/weed"

die() { echo "seaweedfs.sh: $*" >&2; exit 1; }

# Whether process $1 runs (a zombie nobody reaped does not count: its ports are closed).
alive() {
  kill -0 "$1" 2>/dev/null && [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

build() {
  if [ -x "$WEED" ] && "$WEED" version >/dev/null 2>&1; then
    echo "seaweedfs $SEAWEEDFS_VERSION: cached at $WEED"; return 0
  fi
  command -v go >/dev/null || die "go is not installed (needed once to build SeaweedFS)"
  mkdir -p "$CACHE_DIR"
  # One build at a time per machine: a second caller waits for the first and reuses its binary.
  exec 9>"$CACHE_DIR/.lock"
  flock 9
  if [ -x "$WEED" ] && "$WEED" version >/dev/null 2>&1; then
    echo "seaweedfs $SEAWEEDFS_VERSION: cached at $WEED"; return 0
  fi
  local start src work
  start=$(date +%s)
  echo "seaweedfs $SEAWEEDFS_VERSION: building into $CACHE_DIR (once per machine, ~12 min)"
  src=$(cd "$CACHE_DIR" && go mod download -json "$MODULE@$SEAWEEDFS_VERSION" |
        sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -n "$src" ] && [ -d "$src" ] || die "go mod download of $MODULE@$SEAWEEDFS_VERSION failed"
  work=$(mktemp -d "${TMPDIR:-/tmp}/ck-seaweedfs-build.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  cp -r "$src/." "$work/"
  chmod -R u+w "$work"
  (cd "$work" && GOFLAGS=-buildvcs=false nice -n 10 go build -o "$WEED.tmp" ./weed)
  mv -f "$WEED.tmp" "$WEED"
  echo "seaweedfs $SEAWEEDFS_VERSION: built in $(( $(date +%s) - start )) s: $WEED"
}

ACCESS_KEY="${CK_S3_ACCESS_KEY:-ckTestAccessKey}"
SECRET_KEY="${CK_S3_SECRET_KEY:-ckTestSecretKey0123456789abcdefghijklmno}"
BUCKET="${CK_S3_BUCKET:-ctxkeel-test}"

# Eight free TCP ports on 127.0.0.1, as the kernel hands them out.
free_ports() {
  python3 - <<'PY'
import socket
socks = []
for _ in range(8):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
PY
}

# A signed request to the server, as the tests' client will make it: prints the HTTP status.
s3_curl() {
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 --aws-sigv4 "aws:amz:us-east-1:s3" \
    --user "$ACCESS_KEY:$SECRET_KEY" "$@" || true
}

start() {
  local dir="$1"
  [ -x "$WEED" ] || die "no SeaweedFS binary at $WEED: run '$0 build' (or make s3-server)"
  mkdir -p "$dir/data"
  dir=$(cd "$dir" && pwd)
  # A server just killed (a restart test) may take a moment to finish exiting: its threads
  # go one by one, and until the last has, /proc still shows it running.
  local i=0
  while [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")" && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1))
  done
  if [ -f "$dir/pid" ] && alive "$(cat "$dir/pid")"; then
    die "a server started in $dir is still running (pid $(cat "$dir/pid"))"
  fi
  # A restart in the same folder keeps its ports, so the endpoint clients hold stays valid.
  [ -s "$dir/ports" ] || free_ports > "$dir/ports"
  local master master_grpc volume volume_grpc filer filer_grpc s3 s3_grpc
  read -r master master_grpc volume volume_grpc filer filer_grpc s3 s3_grpc < "$dir/ports"
  cat > "$dir/s3.json" <<JSON
{"identities": [{"name": "ctxkeel_test",
  "credentials": [{"accessKey": "$ACCESS_KEY", "secretKey": "$SECRET_KEY"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
JSON
  chmod 600 "$dir/s3.json"
  # Loopback only, every port chosen here, telemetry off: the server talks to nothing else.
  setsid "$WEED" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$dir/data" \
    -master.port="$master" -master.port.grpc="$master_grpc" -master.telemetry=false \
    -master.volumeSizeLimitMB=64 -volume.max=16 -master.electionTimeout=1s \
    -volume.port="$volume" -volume.port.grpc="$volume_grpc" \
    -filer -filer.port="$filer" -filer.port.grpc="$filer_grpc" \
    -filer.localSocket="$dir/filer.sock" \
    -s3 -s3.port="$s3" -s3.port.grpc="$s3_grpc" -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.config="$dir/s3.json" -s3.localSocket="$dir/s3.sock" \
    >> "$dir/weed.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" > "$dir/pid"
  # With CK_S3_WATCH_PID (a test's own pid), the server goes when that process goes, so a test
  # that crashes or is timed out leaves no server behind.
  if [ -n "${CK_S3_WATCH_PID:-}" ]; then
    ( while kill -0 "$CK_S3_WATCH_PID" 2>/dev/null && alive "$pid"; do sleep 1; done
      if alive "$pid"; then kill -KILL "$pid" 2>/dev/null; fi ) > /dev/null 2>&1 < /dev/null &
  fi
  local endpoint="http://127.0.0.1:$s3" deadline=$(( $(date +%s) + ${CK_S3_START_TIMEOUT:-90} ))
  # Ready means a bucket exists and an object can be written into it: the S3 gateway answers
  # before the filer and the volume server have joined the master.
  local st
  while :; do
    alive "$(cat "$dir/pid")" || { tail -20 "$dir/weed.log" >&2; die "weed exited"; }
    st=$(s3_curl -X PUT "$endpoint/$BUCKET")
    if [ "$st" = 200 ] || [ "$st" = 409 ]; then
      st=$(s3_curl -X PUT -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" --data-binary ready \
             "$endpoint/$BUCKET/.ready")
      [ "$st" = 200 ] && break
    fi
    [ "$(date +%s)" -lt "$deadline" ] || { tail -20 "$dir/weed.log" >&2; stop "$dir"; die "no answer from $endpoint"; }
    sleep 0.3
  done
  echo "$endpoint" > "$dir/endpoint"
  echo "$endpoint"
}

stop() {
  local dir="$1" pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  # Only the server this folder started: a stale pid may name another process by now.
  if alive "$pid" && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null |
       grep -qF -- "-dir=$(cd "$dir" && pwd)/data"; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do alive "$pid" || break; sleep 0.2; done
    if alive "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  fi
  rm -f "$dir/pid"
}

case "${1:-}" in
  build) build ;;
  path) [ -x "$WEED" ] || exit 1; echo "$WEED" ;;
  start) [ -n "${2:-}" ] || die "usage: $0 start DIR"; start "$2" ;;
  stop) [ -n "${2:-}" ] || die "usage: $0 stop DIR"; stop "$2" ;;
  *) die "usage: $0 build|path|start DIR|stop DIR" ;;
esac
