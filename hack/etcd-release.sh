#!/usr/bin/env bash
# Usage: hack/etcd-release.sh MINOR (3.5 or 3.6)
#
# Builds an etcd server of an older minor than the one etcdlet links from
# the Go module proxy, via the wrapper module in hack/etcd<MINOR without
# the dot>-bin, for the tests that run etcd of other minors in static pods:
# 3.5 (kubeadm's etcd of Kubernetes 1.33 and before) for the command line
# rendered for its image and the version rules, 3.6 for the rolling upgrade
# to 3.7 and the downgrade back. hack/etcd35.sh and hack/etcd36.sh call it.
# `go install pkg@version` cannot build it: etcd's server module replaces
# its sibling modules with local paths.
#
# Prints the absolute path of the etcd binary as its only stdout line, so
# callers can do:
#   ETCDLET_ETCD35="$(hack/etcd35.sh)" go test ./...
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/etcd<NN>-bin/
# etcd-<version>-<hash of the wrapper's go.sum>/etcd: outside the repository,
# so it survives `git clean`, and keyed so that a bump of the wrapper builds
# afresh. The build is skipped when the binary is already there and
# executable.
set -euo pipefail

minor=${1:-}
log() { echo "etcd-release.sh $minor: $*" >&2; }
fail() { log "error: $*"; exit 1; }

[[ "$minor" =~ ^3\.[0-9]+$ ]] || fail "usage: hack/etcd-release.sh MINOR, e.g. 3.5"
name="etcd${minor/./}-bin"
script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/$name"
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
[[ "$etcd_version" == "v$minor."* ]] ||
	fail "cannot read an etcd $minor version of $etcd_module from $mod_dir/go.mod (got '${etcd_version}')"

cache_bin_dir "$name" "etcd-$etcd_version"

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
