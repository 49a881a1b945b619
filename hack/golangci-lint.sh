#!/usr/bin/env bash
# Builds golangci-lint, the linter `make test` (hack/test.sh) and `make lint`
# run over the whole tree with the repository's .golangci.yml, from the Go
# module proxy. Pinned to v2.15.0, so that every machine reports the same
# findings: a newer release brings new checks, taken up by a deliberate
# bump. Plain `go install pkg@version` builds it: golangci-lint's go.mod has
# no replace directive, so no wrapper module is needed, and none of its
# dependencies enter etcdlet's go.mod.
#
# Prints the absolute path of the golangci-lint binary as its only stdout
# line, so callers can do:
#   lint="$(hack/golangci-lint.sh)" && "$lint" run ./...
# Progress and errors go to stderr.
#
# The binary is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/golangci-lint-bin/
# golangci-lint-<version>/golangci-lint: outside the repository, so it
# survives `git clean`; the version in the path makes a bump build afresh.
# The build is skipped when the binary is already there and executable.
set -euo pipefail

version=v2.15.0
release=${version#v}
# The release's time as the Go module proxy reports it
# (https://proxy.golang.org/github.com/golangci/golangci-lint/v2/@v/v2.15.0.info).
release_date=2026-10-16T10:51:54Z
module=github.com/golangci/golangci-lint/v2

log() { echo "golangci-lint.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

# check_binary PATH: the built binary must run and say what it is before it
# goes into the cache.
check_binary() {
	local out
	out=$("$1" --version 2>&1) || fail "the built golangci-lint does not run: $out"
	grep -Eq "^golangci-lint has version ${release//./\\.} " <<<"$out" ||
		fail "the built golangci-lint reports '$(head -n1 <<<"$out")', expected version $release"
	log "golangci-lint $release"
}

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
# Upstream's release build (.goreleaser.yml) sets main.version, main.commit
# and main.date. cmd/golangci-lint/main.go uses main.version only when
# main.date is set too (otherwise it reports the module version from the
# build info), so both are set here; main.commit stays "?", as the proxy
# does not say which commit the tag is.
go_install_cached golangci-lint "$module/cmd/golangci-lint" "$version" \
	"-s -w -X main.version=$release -X main.date=$release_date" "about 4 minutes"
