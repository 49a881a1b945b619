#!/usr/bin/env bash
# Builds nfpm, the packager `make packages` (hack/packages.sh) makes the .deb
# and .rpm files with, from the Go module proxy. Pinned to v2.45.0: newer
# releases import modules the proxy does not serve (see
# docs/packaging.md).
#
# Prints the absolute path of the nfpm binary as its only stdout line, so
# callers can do:
#   nfpm="$(hack/nfpm.sh)" && "$nfpm" package …
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/nfpm-bin/
# nfpm-<version>/nfpm: outside the repository, so it survives `git clean`;
# the version in the path makes a bump build afresh. The build is skipped
# when the binary is already there and executable.
set -euo pipefail

version=v2.45.0
module=github.com/goreleaser/nfpm/v2

log() { echo "nfpm.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

# check_binary PATH: the built binary must run before it goes into the
# cache. (v2.45.0 built this way reports its version as "dev", so only that
# it runs is checked.)
check_binary() {
	local out
	out=$("$1" --help 2>&1) || fail "the built nfpm does not run: $out"
	grep -q 'package' <<<"$out" || fail "the built nfpm --help does not mention 'package': $(head -n3 <<<"$out")"
}

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
go_install_cached nfpm "$module/cmd/nfpm" "$version" "" "about a minute"
