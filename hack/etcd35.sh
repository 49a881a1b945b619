#!/usr/bin/env bash
# Builds an etcd 3.5 server from the Go module proxy, via the wrapper module
# in hack/etcd35-bin: the test that runs the command line etcdlet renders for
# an etcd 3.5 image (kubeadm's etcd of Kubernetes 1.33 and before) starts it.
# `go install pkg@version` cannot build it: etcd's server module replaces its
# sibling modules with local paths.
#
# Prints the absolute path of the etcd binary as its only stdout line, so
# callers can do:
#   ETCDLET_ETCD35="$(hack/etcd35.sh)" go test ./...
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/etcd35-bin/
# etcd-<version>-<hash of the wrapper's go.sum>/etcd: outside the repository,
# so it survives `git clean`, and keyed so that a bump of the wrapper builds
# afresh. The build is skipped when the binary is already there and
# executable.
set -euo pipefail

log() { echo "etcd35.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/etcd35-bin"
[ -f "$mod_dir/go.mod" ] || fail "wrapper module not found at $mod_dir/go.mod"
[ -f "$mod_dir/go.sum" ] || fail "wrapper module has no go.sum at $mod_dir/go.sum; run 'go mod tidy' in $mod_dir"
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# shellcheck source=lib/wrapper-build.sh
. "$script_dir/lib/wrapper-build.sh"

# The version comes from the wrapper's go.mod, so the cache key and the
# version check below cannot drift from what is actually built.
etcd_module=go.etcd.io/etcd/server/v3
etcd_version=$(awk -v m="$etcd_module" '$1 == m && $2 ~ /^v[0-9]+\.[0-9]+\.[0-9]+$/ { print $2; exit }
	$1 == "require" && $2 == m { print $3; exit }' "$mod_dir/go.mod")
[[ "$etcd_version" =~ ^v3\.5\.[0-9]+$ ]] ||
	fail "cannot read an etcd 3.5 version of $etcd_module from $mod_dir/go.mod (got '${etcd_version}')"

cache_bin_dir etcd35-bin "etcd-$etcd_version"

if [ -x "$bin_dir/etcd" ]; then
	log "using cached binary $bin_dir/etcd"
	echo "$bin_dir/etcd"
	exit 0
fi

begin_build
wrapper_build "$tmp/etcd" "$etcd_module" "-s -w"

# The binary must run and say what it is before it goes into the cache.
version_out=$("$tmp/etcd" --version 2>&1) || fail "the built etcd does not run: $version_out"
grep -q "^etcd Version: ${etcd_version#v}\$" <<<"$version_out" ||
	fail "the built etcd reports '$version_out', expected 'etcd Version: ${etcd_version#v}'"
log "etcd ${etcd_version#v}"

mkdir -p "$bin_dir"
mv -f "$tmp/etcd" "$bin_dir/etcd"
log "binary at $bin_dir/etcd"
echo "$bin_dir/etcd"
