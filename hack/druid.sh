#!/usr/bin/env bash
# Builds the etcd-druid operator that the envtest tests (test/envtest,
# StartDruid) run against their kube-apiserver, from the Go module proxy, via
# the wrapper module in hack/druid-bin. `go install pkg@version` cannot build
# it (its go.mod replaces its api module with ./api), hence the wrapper.
#
# Prints the absolute path of the druid binary as its only stdout line, so
# callers can do:
#   ETCDLET_DRUID="$(hack/druid.sh)" go test ./test/envtest/
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/druid-bin/
# druid-<version>-<hash of the wrapper's go.sum>/druid: outside the
# repository, so it survives `git clean`, and keyed so that a bump of the
# wrapper builds afresh. The build is skipped when the binary is already there
# and executable.
set -euo pipefail

log() { echo "druid.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/druid-bin"
[ -f "$mod_dir/go.mod" ] || fail "wrapper module not found at $mod_dir/go.mod"
[ -f "$mod_dir/go.sum" ] || fail "wrapper module has no go.sum at $mod_dir/go.sum; run 'go mod tidy' in $mod_dir"
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# shellcheck source=lib/wrapper-build.sh
. "$script_dir/lib/wrapper-build.sh"

# The operator version comes from the wrapper's go.mod, so the cache key and
# the -X version flag below cannot drift from what is actually built.
druid_module=github.com/gardener/etcd-druid
druid_version=$(awk -v m="$druid_module" '$1 == m && $2 ~ /^v[0-9]+\.[0-9]+\.[0-9]+$/ { print $2; exit }
	$1 == "require" && $2 == m { print $3; exit }' "$mod_dir/go.mod")
[[ "$druid_version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
	fail "cannot read the $druid_module version from $mod_dir/go.mod (got '${druid_version}')"

cache_bin_dir druid-bin "druid-$druid_version"

if [ -x "$bin_dir/druid" ]; then
	log "using cached binary $bin_dir/druid"
	echo "$bin_dir/druid"
	exit 0
fi

begin_build
pkg=$druid_module/cmd
# Without -X, `druid --version` and its start-up log report
# v0.0.0-master+$Format:%H$; its own Makefile sets the same variable.
wrapper_build "$tmp/druid" "$pkg" "-s -w -X $druid_module/internal/version.gitVersion=$druid_version"

# The binary must run and say what it is before it goes into the cache.
version_out=$("$tmp/druid" --version 2>&1) || fail "the built druid does not run: $version_out"
grep -q "^etcd-druid $druid_version\$" <<<"$version_out" ||
	fail "the built druid reports '$version_out', expected 'etcd-druid $druid_version'"
log "$version_out"

mkdir -p "$bin_dir"
mv -f "$tmp/druid" "$bin_dir/druid"
log "binary at $bin_dir/druid"
echo "$bin_dir/druid"
