#!/usr/bin/env bash
# Builds promtool, Prometheus's rule and config checker, from the Go module
# proxy: daemon/metrics's tests run `promtool check rules` and `promtool
# test rules` on the shipped alert rules (deploy/prometheus/) and `promtool
# check metrics` on what the agent's /metrics serves. Plain `go install pkg@version` builds it:
# Prometheus's go.mod has no replace directive, so no wrapper module is
# needed, and none of Prometheus's dependencies enter etcdlet's go.mod.
#
# Prints the absolute path of the promtool binary as its only stdout line,
# so callers can do:
#   ETCDLET_PROMTOOL="$(hack/promtool.sh)" go test ./daemon/metrics/
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/promtool-bin/
# promtool-<version>/promtool: outside the repository, so it survives
# `git clean`; the version in the path makes a bump build afresh. The build
# is skipped when the binary is already there and executable.
set -euo pipefail

# Prometheus 3.x publishes its Go module as v0.<3 digits of the release>:
# v0.316.0 is Prometheus 3.16.0. Its go.mod asks for Go 1.26.7 or newer.
version=v0.316.0
release=3.16.0
module=github.com/prometheus/prometheus

log() { echo "promtool.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

# check_binary PATH: the built binary must run and say what it is before it
# goes into the cache.
check_binary() {
	local out
	out=$("$1" --version 2>&1) || fail "the built promtool does not run: $out"
	grep -Eq "^promtool, version ${release//./\\.} " <<<"$out" ||
		fail "the built promtool reports '$(head -n1 <<<"$out")', expected version $release"
	log "promtool $release"
}

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# Without -X, `promtool --version` reports an empty version; Prometheus's
# own build (promu) sets the same variable.
go_install_cached promtool "$module/cmd/promtool" "$version" \
	"-s -w -X github.com/prometheus/common/version.Version=$release" "about 10 minutes"
