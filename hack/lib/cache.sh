# Sourced by the hack/*.sh scripts that build a test tool once into the
# cache outside the repository (${ETCDLET_CACHE:-$HOME/.cache/etcdlet}), so
# that it survives `git clean` and only a cold machine pays for it. The
# caller sets -euo pipefail and defines log and fail.

source "$(dirname "${BASH_SOURCE[0]}")/toolchain.sh"

# cache_subdir SUBDIR: sets bin_root to SUBDIR of the cache, created, its
# path without symlinks.
cache_subdir() {
	local cache
	if [ -z "${ETCDLET_CACHE:-}" ]; then
		[ -n "${HOME:-}" ] || fail "neither ETCDLET_CACHE nor HOME is set; set ETCDLET_CACHE to a cache directory"
		cache=$HOME/.cache/etcdlet
	else
		cache=$ETCDLET_CACHE
	fi
	mkdir -p "$cache/$1" || fail "cannot create $cache/$1"
	bin_root=$(cd "$cache/$1" && pwd -P)
}

# build_dir: $tmp, a temporary directory on the cache's filesystem removed
# on exit. What is built goes there first and is moved into place when
# finished, so that an interrupted build never leaves a half-written file
# that a cache check would accept.
build_dir() {
	tmp=$(mktemp -d "$bin_root/.build.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
}

# go_install_cached NAME PACKAGE VERSION LDFLAGS DURATION: prints the path
# of the binary NAME built by `go install -trimpath PACKAGE@VERSION` into
# NAME-bin/NAME-VERSION/ of the cache (the version in the path makes a bump
# build afresh), building it only when it is not there yet. DURATION says
# how long the first build takes, for the log. Plain `go install` fits
# tools whose go.mod has no replace directive; each is its own main module
# with the versions of its go.sum, whatever this repository's workspace and
# flags say. The caller defines check_binary PATH, which fails unless the
# freshly built binary runs and is the version wanted.
go_install_cached() {
	local name=$1 package=$2 version=$3 ldflags=$4 duration=$5
	cache_subdir "$name-bin"
	local dir=$bin_root/$name-$version
	if [ -x "$dir/$name" ]; then
		log "using cached binary $dir/$name"
		echo "$dir/$name"
		return 0
	fi
	command -v go >/dev/null || fail "go not found in PATH; install Go from https://go.dev/dl/ (any recent version: $GOTOOLCHAIN, which go.mod names, is then fetched through the Go module proxy)"
	build_dir
	log "building $package@$version (the first build takes $duration)"
	local start=$SECONDS
	(export GOWORK=off GOFLAGS= CGO_ENABLED=0 GOBIN=$tmp &&
		go install -trimpath -ldflags "$ldflags" "$package@$version") >&2 ||
		fail "go install $package@$version failed (see above); it needs the Go module proxy (GOPROXY=$(go env GOPROXY))"
	log "built $name in $((SECONDS - start)) s"
	check_binary "$tmp/$name"
	mkdir -p "$dir"
	mv -f "$tmp/$name" "$dir/$name"
	log "binary at $dir/$name"
	echo "$dir/$name"
}
