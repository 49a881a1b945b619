#!/usr/bin/env bash
# Builds the kube-apiserver and etcd binaries that envtest (test/envtest) runs,
# from the Go module proxy, via the wrapper module in hack/envtest-bins.
# `go install pkg@version` cannot build them (their go.mod files replace
# staging modules with local paths), hence the wrapper.
#
# Prints the absolute path of the directory holding both binaries as its only
# stdout line, so callers can do:
#   assets="$(hack/envtest.sh)" && KUBEBUILDER_ASSETS="$assets" go test ./...
# Progress and errors go to stderr.
#
# The directory is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/envtest-bin/
# k8s-<version>-<hash of the wrapper's go.sum>: outside the repository, so it
# survives `git clean`, and keyed so that a bump of the wrapper builds afresh.
# The build is skipped when both binaries are already there and executable.
set -euo pipefail

log() { echo "envtest.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/envtest-bins"
[ -f "$mod_dir/go.mod" ] || fail "wrapper module not found at $mod_dir/go.mod"
[ -f "$mod_dir/go.sum" ] || fail "wrapper module has no go.sum at $mod_dir/go.sum; run 'go mod tidy' in $mod_dir"
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# shellcheck source=lib/wrapper-build.sh
. "$script_dir/lib/wrapper-build.sh"

kubernetes_version

cache_bin_dir envtest-bin "k8s-$k8s_version"

if [ -x "$bin_dir/kube-apiserver" ] && [ -x "$bin_dir/etcd" ]; then
	log "using cached binaries in $bin_dir"
	echo "$bin_dir"
	exit 0
fi

begin_build

# Each binary gets its own -o file: `go build -o dir/ a b` names etcd "server".
wrapper_build "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
wrapper_build "$tmp/etcd" go.etcd.io/etcd/server/v3 "-s -w"

# Both binaries must run and say what they are: the etcd binary is also what
# the static-pod end-to-end tests run as the kubelet's etcd.
apiserver_version=$("$tmp/kube-apiserver" --version 2>&1) ||
	fail "the built kube-apiserver does not run: $apiserver_version"
[ "$apiserver_version" = "Kubernetes $k8s_version" ] ||
	fail "the built kube-apiserver reports '$apiserver_version', expected 'Kubernetes $k8s_version'"
etcd_version=$("$tmp/etcd" --version 2>&1) || fail "the built etcd does not run: $etcd_version"
grep -q '^etcd Version: [0-9]' <<<"$etcd_version" ||
	fail "the built etcd --version prints no version: $etcd_version"
log "$apiserver_version; $(head -n1 <<<"$etcd_version")"

mkdir -p "$bin_dir"
mv -f "$tmp/kube-apiserver" "$tmp/etcd" "$bin_dir/"
log "binaries in $bin_dir"
echo "$bin_dir"
