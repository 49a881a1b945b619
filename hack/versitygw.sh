#!/usr/bin/env bash
# Builds versitygw, the real S3 server the daemon/snapshot tests and
# benchmark upload to (test/s3test starts it), from the Go module proxy.
# Plain `go install pkg@version` builds it: versitygw's go.mod has no replace
# directive, so no wrapper module is needed.
#
# Prints the absolute path of the versitygw binary as its only stdout line,
# so callers can do:
#   ETCDLET_VERSITYGW="$(hack/versitygw.sh)" go test ./daemon/snapshot/
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/versitygw-bin/
# versitygw-<version>/versitygw: outside the repository, so it survives
# `git clean`; the version in the path makes a bump build afresh. The build
# is skipped when the binary is already there and executable.
set -euo pipefail

version=v1.8.0
module=github.com/versity/versitygw

log() { echo "versitygw.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

# check_binary PATH: the built binary must run and say what it is before it
# goes into the cache.
check_binary() {
	local out
	out=$("$1" --version 2>&1) || fail "the built versitygw does not run: $out"
	grep -Eq "^Version *: $version\$" <<<"$out" ||
		fail "the built versitygw reports '$(head -n1 <<<"$out")', expected version $version"
	log "versitygw $version"
}

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# Without -X, `versitygw --version` says "git"; its Makefile sets the same.
go_install_cached versitygw "$module/cmd/versitygw" "$version" "-s -w -X main.Version=$version" "about 2 minutes"
