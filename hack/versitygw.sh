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

if [ -z "${ETCDLET_CACHE:-}" ]; then
	[ -n "${HOME:-}" ] || fail "neither ETCDLET_CACHE nor HOME is set; set ETCDLET_CACHE to a cache directory"
	cache=$HOME/.cache/etcdlet
else
	cache=$ETCDLET_CACHE
fi
mkdir -p "$cache/versitygw-bin" || fail "cannot create $cache/versitygw-bin"
bin_root=$(cd "$cache/versitygw-bin" && pwd -P)
bin_dir=$bin_root/versitygw-$version

if [ -x "$bin_dir/versitygw" ]; then
	log "using cached binary $bin_dir/versitygw"
	echo "$bin_dir/versitygw"
	exit 0
fi

command -v go >/dev/null || fail "go not found in PATH; install Go 1.26 from https://go.dev/dl/"
# Built into a temporary directory on the cache's filesystem and moved into
# place when finished, so an interrupted build never leaves a half-written
# file that the executable check above would accept.
tmp=$(mktemp -d "$bin_root/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# `go install pkg@version` builds versitygw as its own main module, with the
# versions of its go.mod; the caller's workspace and flags (-mod=vendor, say)
# are for this repository, not for it.
export GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN=$tmp
log "building $module/cmd/versitygw@$version (the first build takes about 2 minutes)"
start=$SECONDS
# Without -X, `versitygw --version` says "git"; its Makefile sets the same.
go install -trimpath -ldflags "-s -w -X main.Version=$version" "$module/cmd/versitygw@$version" >&2 ||
	fail "go install $module/cmd/versitygw@$version failed (see above); it needs the Go module proxy (GOPROXY=$(go env GOPROXY))"
log "built versitygw in $((SECONDS - start)) s"

# The binary must run and say what it is before it goes into the cache.
out=$("$tmp/versitygw" --version 2>&1) || fail "the built versitygw does not run: $out"
grep -Eq "^Version *: $version\$" <<<"$out" ||
	fail "the built versitygw reports '$(head -n1 <<<"$out")', expected version $version"
log "versitygw $version"

mkdir -p "$bin_dir"
mv -f "$tmp/versitygw" "$bin_dir/versitygw"
log "binary at $bin_dir/versitygw"
echo "$bin_dir/versitygw"
