#!/usr/bin/env bash
# make test: every check (gofmt, go vet, golangci-lint) and every test
# package, the unit packages (with the race detector) and the end-to-end
# packages side by side. One failure never hides the rest: each step runs
# to its end, and the summary names every failing step, package and test.
# Exits 1 if anything failed. The membership simulator (daemon/sim) plays
# its 10,000 schedules beside them, and a short fault campaign
# (test/campaign) runs against real agents.
#
# Environment: GO (default go), TEST_FLAGS (default -count=1 -timeout 45m),
# ETCDLET_CACHE (where hack/envtest.sh keeps kube-apiserver and etcd, and
# hack/golangci-lint.sh the linter).
set -uo pipefail

cd "$(dirname "$0")/.."
source hack/lib/toolchain.sh
GO=${GO:-go}
TEST_FLAGS=${TEST_FLAGS:--count=1 -timeout 45m}
logs=$(mktemp -d -t etcdlet-test.XXXXXX)
trap 'rm -rf "$logs"' EXIT
failed=()

step() { echo; echo "== $*"; }

step "formatting, go vet and golangci-lint (hack/golangci-lint.sh, .golangci.yml)"
unformatted=$(gofmt -l . 2>&1)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"
  failed+=("gofmt: $(echo $unformatted)")
fi
$GO vet ./... || failed+=("go vet")
# golangci-lint v2.15.0, built once into the cache; the linters and their
# exclusions are in .golangci.yml.
if lint=$(hack/golangci-lint.sh); then
  "$lint" run ./... || failed+=("golangci-lint")
else
  failed+=("hack/golangci-lint.sh: golangci-lint could not be built")
fi

step "kube-apiserver and etcd for the tests (hack/envtest.sh)"
# On failure the tests that need them fail too, each saying so.
if assets=$(hack/envtest.sh); then
  export KUBEBUILDER_ASSETS=$assets
else
  failed+=("hack/envtest.sh: kube-apiserver and etcd could not be built")
fi

step "etcd-druid for the tests (hack/druid.sh)"
# On failure the tests that run druid fail too, each saying so.
if druid=$(hack/druid.sh); then
  export ETCDLET_DRUID=$druid
else
  failed+=("hack/druid.sh: etcd-druid could not be built")
fi

step "versitygw, the S3 server for the snapshot tests (hack/versitygw.sh)"
# On failure the tests that store snapshots in S3 fail too, each saying so.
if versitygw=$(hack/versitygw.sh); then
  export ETCDLET_VERSITYGW=$versitygw
else
  failed+=("hack/versitygw.sh: versitygw could not be built")
fi

step "etcd-backup-restore's etcdbrctl, which restores etcdlet's snapshots in a test (hack/etcdbrctl.sh)"
if etcdbrctl=$(hack/etcdbrctl.sh); then
  export ETCDLET_ETCDBRCTL=$etcdbrctl
else
  failed+=("hack/etcdbrctl.sh: etcdbrctl could not be built")
fi

step "etcd 3.5, which runs the command line rendered for an etcd 3.5 image (hack/etcd35.sh)"
# On failure the tests that run it (daemon/runtime/staticpod/manifest, test/version_test.go) fail too, saying so.
if etcd35=$(hack/etcd35.sh); then
  export ETCDLET_ETCD35=$etcd35
else
  failed+=("hack/etcd35.sh: etcd 3.5 could not be built")
fi

step "etcd 3.6, which the rolling upgrade to 3.7 starts from (hack/etcd36.sh)"
# On failure the test that runs it (test/version_test.go) fails too, saying so.
if etcd36=$(hack/etcd36.sh); then
  export ETCDLET_ETCD36=$etcd36
else
  failed+=("hack/etcd36.sh: etcd 3.6 could not be built")
fi

step "promtool, which checks the shipped alert rules (hack/promtool.sh)"
# On failure the tests that run promtool (daemon/metrics) fail too, each saying so.
if promtool=$(hack/promtool.sh); then
  export ETCDLET_PROMTOOL=$promtool
else
  failed+=("hack/promtool.sh: promtool could not be built")
fi

step "nfpm, the packager of the .deb and .rpm (hack/nfpm.sh)"
# On failure the package tests (test/packages_test.go) fail too, each saying so.
if nfpm=$(hack/nfpm.sh); then
  export ETCDLET_NFPM=$nfpm
else
  failed+=("hack/nfpm.sh: nfpm could not be built")
fi

step "the pristine Debian host the nspawn tests boot (hack/debian-root.sh)"
# debootstrap from the Debian mirror, once; on failure the install test fails too.
if debian_root=$(hack/debian-root.sh); then
  export ETCDLET_DEBIAN_ROOT=$debian_root
else
  failed+=("hack/debian-root.sh: the Debian root could not be built")
fi

step "the kubelet and kubeadm v1.37.1 for the real-kubelet and kubeadm tests (hack/kube-node.sh)"
# Built once from the wrapper module that builds kube-apiserver; on failure
# the tests that run them fail too, each saying so.
if kube_node=$(hack/kube-node.sh); then
  export ETCDLET_KUBE_NODE=$kube_node
else
  failed+=("hack/kube-node.sh: the kubelet and kubeadm could not be built")
fi

step "Debian's containerd and runc for the real-kubelet hosts (hack/containerd-debs.sh)"
if containerd_debs=$(hack/containerd-debs.sh); then
  export ETCDLET_CONTAINERD_DEBS=$containerd_debs
else
  failed+=("hack/containerd-debs.sh: the containerd and runc packages could not be downloaded")
fi

# The test output goes through hack/testsummary: go test -json is kept for
# the report at the end, and shown as plain go test shows it.
summary=$logs/testsummary
if ! $GO build -o "$summary" ./hack/testsummary; then
  echo "hack/testsummary could not be built"; exit 1
fi

# run NAME [-v] ARGS...: go test in the background; its JSON events in
# $logs/NAME.json, its exit status in $logs/NAME.json.rc, its output shown
# (every line with -v) prefixed [NAME].
run() {
  local name=$1; shift
  local verbose=
  if [ "$1" = -v ]; then verbose=-v; shift; fi
  ( $GO test -json $TEST_FLAGS "$@" 2>&1; echo $? >"$logs/$name.json.rc" ) |
    tee "$logs/$name.json" | "$summary" stream $verbose "$name" &
}

packages=$($GO list ./... | grep -v -e '/test$' -e '/test/campaign$')
step "unit packages (-race), end-to-end tests (./test/), the simulator's 10,000 schedules and a fault campaign, side by side"
run unit -race $packages
run e2e -v ./test/
# The simulator plays 300 schedules under -race in the unit step; here the
# full count, without the race detector's cost.
run sim -v ./daemon/sim/ -run TestSchedules -sim.schedules=10000
# A short fault campaign (test/campaign: at least 50 faults, two minutes of
# them, a fresh seed each run; a violation prints the command that replays
# it), with the campaign's own unit tests.
run campaign -v ./test/campaign/ -campaign.duration=2m -campaign.faults=50
wait

# Each package's time and the slowest ten tests, so that a creeping suite is
# seen, then what failed in each run.
echo
"$summary" report unit="$logs/unit.json" e2e="$logs/e2e.json" sim="$logs/sim.json" campaign="$logs/campaign.json" ||
  failed+=("go test: see the failures above")

echo
if [ ${#failed[@]} -eq 0 ]; then
  echo "== make test: everything passed"
  exit 0
fi
echo "== make test: FAILED"
printf '   %s\n' "${failed[@]}"
exit 1
