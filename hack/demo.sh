#!/usr/bin/env bash
# make demo: watch etcdlet keep etcd membership equal to a members file.
#
# Three agents on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (embedded etcd, data
# under a temporary directory) form a cluster by themselves (cluster.bootstrap
# consent, for labs; the default waits for `etcdlet bootstrap --approve`).
# Then 127.0.0.4 is added to the members file and its agent started; then
# 127.0.0.2 is dropped from the file. `etcdlet status` is printed after each step. Everything is
# stopped and removed on exit, also on Ctrl-C (DEMO_KEEP=1 keeps the files).
set -euo pipefail

BIN=${1:-bin/etcdlet}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
CLIENT_PORT=${DEMO_CLIENT_PORT:-2379}
PEER_PORT=${DEMO_PEER_PORT:-2380}
METRICS_PORT=${DEMO_METRICS_PORT:-2381}
AGENT_PORT=${DEMO_AGENT_PORT:-9479}
DIR=$(mktemp -d /tmp/etcdlet-demo.XXXXXX)
declare -A PIDS=()

cleanup() {
  trap - EXIT INT TERM
  echo
  echo "== stopping the agents"
  for n in "${!PIDS[@]}"; do kill -TERM "${PIDS[$n]}" 2>/dev/null || true; done
  for n in "${!PIDS[@]}"; do
    for _ in $(seq 1 300); do kill -0 "${PIDS[$n]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${PIDS[$n]}" 2>/dev/null || true
  done
  if [ "${DEMO_KEEP:-}" = 1 ]; then
    echo "kept $DIR (agent logs: $DIR/n*/agent.log)"
  else
    rm -rf "$DIR"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

in_use() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }
for n in 1 2 3 4; do
  for p in "$CLIENT_PORT" "$PEER_PORT" "$METRICS_PORT" "$AGENT_PORT"; do
    if in_use "127.0.0.$n" "$p"; then
      echo "demo: 127.0.0.$n:$p is already in use (a local etcd?); choose free ports with" >&2
      echo "      DEMO_CLIENT_PORT, DEMO_PEER_PORT, DEMO_METRICS_PORT and DEMO_AGENT_PORT" >&2
      exit 1
    fi
  done
done

members() { printf '%s\n' "# the externally managed member list, one IP per line" "$@" > "$DIR/members.tmp"; mv "$DIR/members.tmp" "$DIR/members"; }

config() {
  local n=$1
  mkdir -p "$DIR/n$n"
  cat > "$DIR/n$n/config.yaml" <<YAML
cluster:
  name: etcd-main
  # A lab: the three fresh nodes form the cluster by themselves once all of
  # them confirm they are fresh. etcdlet's default, explicit, waits for an
  # operator's act (etcdlet bootstrap --approve on one node).
  bootstrap: consent
members:
  source: file
  file: $DIR/members
node:
  address: 127.0.0.$n
etcd:
  runtime: embedded
  dataDir: $DIR/n$n/data
  clientPort: $CLIENT_PORT
  peerPort: $PEER_PORT
  listenMetricsURL: http://127.0.0.$n:$METRICS_PORT
agent:
  stateDir: $DIR/n$n/state
  listen: 127.0.0.$n:$AGENT_PORT
  reconcileInterval: 2s
  logFormat: text
YAML
}

start() {
  local n=$1
  config "$n"
  "$BIN" run --config "$DIR/n$n/config.yaml" >"$DIR/n$n/agent.log" 2>&1 &
  PIDS[$n]=$!
  echo "   started agent $n (pid ${PIDS[$n]}), node address 127.0.0.$n"
}

# status prints the cluster once membership matches the list, then what
# the agents logged about membership since the step began.
status() {
  local since=$1
  echo
  "$BIN" status --config "$DIR/n1/config.yaml" --wait 90s
  echo
  echo "   what the agents did:"
  grep -h 'msg="membership change"\|msg="local member"\|moved data dir' "$DIR"/n*/agent.log |
    awk -v since="time=$since" '$1 >= since' | sort |
    sed -E 's/^time=[^ ]+T([0-9:]+)\.[0-9]+Z /   \1 /; s/ level=[A-Z]+//'
}

now() { date -u +%Y-%m-%dT%H:%M:%S; }

echo "== step 1: three agents, members file [127.0.0.1 127.0.0.2 127.0.0.3]  (files in $DIR)"
since=$(now)
members 127.0.0.1 127.0.0.2 127.0.0.3
start 1; start 2; start 3
status "$since"

echo
echo "== step 2: add 127.0.0.4 to the members file and start its agent"
since=$(now)
start 4
members 127.0.0.1 127.0.0.2 127.0.0.3 127.0.0.4
status "$since"

echo
echo "== step 3: drop 127.0.0.2 from the members file"
since=$(now)
members 127.0.0.1 127.0.0.3 127.0.0.4
for _ in $(seq 1 300); do compgen -G "$DIR/n2/data.etcdlet-moved-*" >/dev/null && break; sleep 0.1; done
status "$since"
echo
echo "   127.0.0.2's agent stopped its member and moved the data dir aside; nothing was deleted:"
ls -d "$DIR"/n2/data* | sed 's/^/   /'
