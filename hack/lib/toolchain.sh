# Sourced by every hack/*.sh script that runs go (directly or through
# lib/cache.sh). It exports GOTOOLCHAIN as the version go.mod's go line
# names, so that everything builds with that Go whatever Go the machine
# has: go1.27.3 and later fix an HTTP/2 server race through which any
# client could crash the agent (earlier toolchains must never build it).
# A machine's own Go does not switch by itself: the go.env of go.dev's and
# Debian's Go sets GOTOOLCHAIN=local. The first go command downloads the
# toolchain through the Go module proxy (about 10 s) into the module
# cache. The Makefile exports the same.
toolchain_go_mod="$(dirname "${BASH_SOURCE[0]}")/../../go.mod"
GOTOOLCHAIN=$(awk '$1 == "go" { print "go" $2; exit }' "$toolchain_go_mod")
[[ "$GOTOOLCHAIN" =~ ^go1\.[0-9]+\.[0-9]+$ ]] || {
	echo "hack/lib/toolchain.sh: no go line with a full version (go 1.N.P) in $toolchain_go_mod" >&2
	exit 1
}
export GOTOOLCHAIN
unset toolchain_go_mod
