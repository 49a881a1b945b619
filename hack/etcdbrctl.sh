#!/usr/bin/env bash
# Builds etcdbrctl, the CLI of gardener/etcd-backup-restore (its `snapshot`
# and `restore` subcommands read and write backups in the layout etcd-druid's
# backup sidecar uses), from the Go module proxy, via the wrapper module in
# hack/etcdbrctl-bin. `go install pkg@version` cannot build it: its go.mod has
# a replace directive, and the proxy refuses the module's version list, which
# `go install` wants for its deprecation check.
#
# Prints the absolute path of the etcdbrctl binary as its only stdout line, so
# callers can do:
#   ETCDLET_ETCDBRCTL="$(hack/etcdbrctl.sh)" go test ./...
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/etcdbrctl-bin/
# etcdbrctl-<version>-<hash of the wrapper's go.sum>/etcdbrctl: outside the
# repository, so it survives `git clean`, and keyed so that a bump of the
# wrapper builds afresh. The build is skipped when the binary is already there
# and executable.
set -euo pipefail

log() { echo "etcdbrctl.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
mod_dir="$script_dir/etcdbrctl-bin"
[ -f "$mod_dir/go.mod" ] || fail "wrapper module not found at $mod_dir/go.mod"
[ -f "$mod_dir/go.sum" ] || fail "wrapper module has no go.sum at $mod_dir/go.sum; restore it from git (it cannot simply be regenerated, see the comment in $mod_dir/go.mod)"
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# shellcheck source=lib/wrapper-build.sh
. "$script_dir/lib/wrapper-build.sh"

# The version comes from the wrapper's go.mod, so the cache key and the -X
# version flag below cannot drift from what is actually built.
br_module=github.com/gardener/etcd-backup-restore
br_version=$(awk -v m="$br_module" '$1 == m && $2 ~ /^v[0-9]+\.[0-9]+\.[0-9]+$/ { print $2; exit }
	$1 == "require" && $2 == m { print $3; exit }' "$mod_dir/go.mod")
[[ "$br_version" =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] ||
	fail "cannot read the $br_module version from $mod_dir/go.mod (got '${br_version}')"

cache_bin_dir etcdbrctl-bin "etcdbrctl-$br_version"

if [ -x "$bin_dir/etcdbrctl" ]; then
	log "using cached binary $bin_dir/etcdbrctl"
	echo "$bin_dir/etcdbrctl"
	exit 0
fi

begin_build
# The commit of the release, for `etcdbrctl --version`'s "Git SHA" line, as
# the proxy records it; left empty if the proxy does not say.
git_sha=$(cd "$mod_dir" && go mod download -json "$br_module@$br_version" |
	sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{40\}\)".*/\1/p' | head -n1) ||
	fail "cannot download $br_module@$br_version from the Go module proxy; check GOPROXY and the network"
# The package is the module root (main.go). Without -X, `etcdbrctl --version`
# reports an empty version; its own Makefile sets the same variables.
wrapper_build "$tmp/etcdbrctl" "$br_module" \
	"-s -w -X $br_module/pkg/version.Version=$br_version -X $br_module/pkg/version.GitSHA=$git_sha"

# The binary must run and say what it is before it goes into the cache. It
# logs its version through logrus, on stderr, as
#   time="..." level=info msg="etcd-backup-restore Version: v0.44.1"
version_out=$("$tmp/etcdbrctl" --version 2>&1) || fail "the built etcdbrctl does not run: $version_out"
grep -q "etcd-backup-restore Version: $br_version\"\$" <<<"$version_out" ||
	fail "the built etcdbrctl reports '$version_out', expected 'etcd-backup-restore Version: $br_version'"
log "etcdbrctl $br_version (git $git_sha)"

mkdir -p "$bin_dir"
mv -f "$tmp/etcdbrctl" "$bin_dir/etcdbrctl"
log "binary at $bin_dir/etcdbrctl"
echo "$bin_dir/etcdbrctl"
