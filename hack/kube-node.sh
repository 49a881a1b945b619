#!/usr/bin/env bash
# Builds the kubelet and kubeadm that the end-to-end tests run (the kubelet
# inside the nspawn hosts of test/kubelet_test.go, kubeadm for the procedure
# of docs/kubeadm.md), from the Go module proxy, through the same wrapper
# module as kube-apiserver (hack/envtest-bins; its tools.go pulls in what
# they need), so all three are one Kubernetes version.
#
# Prints the absolute path of the directory holding both binaries as its only
# stdout line:  kube="$(hack/kube-node.sh)" && ETCDLET_KUBE_NODE="$kube" …
# The directory is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/kube-node-bin/
# k8s-<version>-<hash of the wrapper's go.sum>; a cold build takes about
# 6 minutes on 2 cores, a warm one is skipped.
set -euo pipefail

log() { echo "kube-node.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/envtest-bins"
[ -f "$mod_dir/go.sum" ] || fail "wrapper module has no go.sum at $mod_dir/go.sum; run 'go mod tidy' in $mod_dir"
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# shellcheck source=lib/wrapper-build.sh
. "$script_dir/lib/wrapper-build.sh"

kubernetes_version
cache_bin_dir kube-node-bin "k8s-$k8s_version"

if [ -x "$bin_dir/kubelet" ] && [ -x "$bin_dir/kubeadm" ]; then
	log "using cached binaries in $bin_dir"
	echo "$bin_dir"
	exit 0
fi

begin_build
wrapper_build "$tmp/kubelet" k8s.io/kubernetes/cmd/kubelet "$k8s_ldflags"
wrapper_build "$tmp/kubeadm" k8s.io/kubernetes/cmd/kubeadm "$k8s_ldflags"

# kubeadm's preflight compares the kubelet's --version with its own: both
# must say the wrapper's version.
for b in kubelet kubeadm; do
	case $b in
	kubelet) v=$("$tmp/kubelet" --version 2>&1) || fail "the built kubelet does not run: $v"; want="Kubernetes $k8s_version" ;;
	kubeadm) v=$("$tmp/kubeadm" version -o short 2>&1) || fail "the built kubeadm does not run: $v"; want="$k8s_version" ;;
	esac
	[ "$v" = "$want" ] || fail "the built $b reports '$v', expected '$want'"
done
log "kubelet and kubeadm $k8s_version"

mkdir -p "$bin_dir"
mv -f "$tmp/kubelet" "$tmp/kubeadm" "$bin_dir/"
log "binaries in $bin_dir"
echo "$bin_dir"
