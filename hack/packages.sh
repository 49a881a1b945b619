#!/usr/bin/env bash
# Builds the etcdlet .deb and .rpm packages (`make packages`; the package
# tests in test/packages_test.go run it too). See docs/packaging.md.
#
#   hack/packages.sh                  packages for every architecture into dist/
#   hack/packages.sh version [DESCRIBE [EPOCH]]
#                                     print the package version (of this
#                                     checkout, or of a `git describe` string
#                                     and a commit time) and exit
#
# Environment (all optional):
#   VERSION            package version; default: from `git describe --tags
#                      --always --dirty` (docs/packaging.md, "Versions")
#   RELEASE            package release, the deb revision and rpm Release (1)
#   DIST               output directory (dist), created
#   ARCHES             Go architectures to package ("amd64 arm64")
#   SOURCE_DATE_EPOCH  the time stamped into the packages and man pages;
#                      default: the commit's time (git log -1 --format=%ct)
#   PACKAGE_CONFIG     the default configuration to ship
#                      (packaging/config.yaml)
#   ETCDLET_NFPM       the nfpm binary; default: hack/nfpm.sh builds it once
#                      into the cache
#   GO                 the go command (go)
#
# Writes DIST/etcdlet_<version>-<release>_<arch>.deb and
# DIST/etcdlet-<version>-<release>.<rpm arch>.rpm (x86_64, aarch64) and prints
# their paths, one per line, on stdout. Two runs on the same commit with the
# same environment write byte-identical files.
set -euo pipefail

log() { echo "packages.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$repo"
source hack/lib/toolchain.sh
GO=${GO:-go}

# package_version DESCRIBE EPOCH: a version dpkg and rpm both accept and
# order by history:
#   v1.2.3                  -> 1.2.3
#   v1.3.0-rc.1             -> 1.3.0~rc.1     (before 1.3.0)
#   v1.2.3-4-gabc1234       -> 1.2.3+4.gabc1234   (4 commits after v1.2.3)
#   abc1234 (no tag yet)    -> 0.0.0~git<YYYYMMDD>.<hhmmss>.gabc1234 (the
#                              commit's UTC time; before any release)
# and ".dirty" appended for a working tree with uncommitted changes.
package_version() {
	local describe=$1 epoch=$2 dirty= v
	case $describe in *-dirty)
		dirty=.dirty
		describe=${describe%-dirty}
		;;
	esac
	local semver='v?([0-9]+\.[0-9]+\.[0-9]+)(-([0-9A-Za-z.]+))?'
	if [[ $describe =~ ^${semver}-([0-9]+)-g([0-9a-f]+)$ ]]; then
		v=${BASH_REMATCH[1]}${BASH_REMATCH[3]:+~${BASH_REMATCH[3]}}+${BASH_REMATCH[4]}.g${BASH_REMATCH[5]}
	elif [[ $describe =~ ^${semver}$ ]]; then
		v=${BASH_REMATCH[1]}${BASH_REMATCH[3]:+~${BASH_REMATCH[3]}}
	elif [[ $describe =~ ^[0-9a-f]{4,}$ ]]; then
		[[ $epoch =~ ^[0-9]+$ ]] || fail "commit time '$epoch' is not seconds since 1970"
		v=0.0.0~git$(date -u -d "@$epoch" +%Y%m%d.%H%M%S).g$describe
	else
		fail "cannot make a package version of 'git describe' output '$describe': tags must look like v1.2.3 or v1.2.3-rc.1; or set VERSION"
	fi
	echo "$v$dirty"
}

# check_version V: what both dpkg (upstream version) and rpm (Version) take.
check_version() {
	[[ $1 =~ ^[0-9][0-9A-Za-z.+~]*$ ]] ||
		fail "version '$1' must start with a digit and hold only letters, digits and . + ~ (no '-' or '_': rpm refuses them, and dpkg reads '-' as the revision)"
}

commit_epoch() {
	git -C "$repo" log -1 --format=%ct 2>/dev/null ||
		fail "cannot read the commit time (git log -1 --format=%ct); set SOURCE_DATE_EPOCH (and VERSION) outside a git checkout"
}

checkout_version() {
	local describe
	describe=$(git -C "$repo" describe --tags --always --dirty 2>/dev/null) ||
		fail "git describe failed; set VERSION outside a git checkout"
	package_version "$describe" "$(commit_epoch)"
}

if [ "${1:-}" = version ]; then
	if [ $# -ge 2 ]; then
		v=$(package_version "$2" "${3:-$(commit_epoch)}")
	else
		v=${VERSION:-$(checkout_version)}
	fi
	check_version "$v"
	echo "$v"
	exit 0
fi
[ $# -eq 0 ] || fail "unknown arguments '$*'; usage: hack/packages.sh [version [DESCRIBE [EPOCH]]]"

export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(commit_epoch)}
[[ $SOURCE_DATE_EPOCH =~ ^[0-9]+$ ]] || fail "SOURCE_DATE_EPOCH='$SOURCE_DATE_EPOCH' is not seconds since 1970"
version=${VERSION:-$(checkout_version)}
check_version "$version"
release=${RELEASE:-1}
[[ $release =~ ^[0-9][0-9A-Za-z.+~]*$ ]] || fail "RELEASE='$release' must start with a digit and hold only letters, digits and . + ~"
dist=${DIST:-dist}
arches=${ARCHES:-amd64 arm64}
config=${PACKAGE_CONFIG:-packaging/config.yaml}
[ -f "$config" ] || fail "default configuration $config not found"
for arch in $arches; do
	case $arch in amd64 | arm64) ;; *) fail "ARCHES: '$arch' is not packaged (amd64, arm64)" ;; esac
done
command -v gzip >/dev/null || fail "gzip not found"
nfpm=${ETCDLET_NFPM:-$(hack/nfpm.sh)}
[ -x "$nfpm" ] || fail "nfpm '$nfpm' is not executable; run hack/nfpm.sh"

start=$SECONDS
mkdir -p "$dist"
dist=$(cd "$dist" && pwd -P)
work=$(mktemp -d -t etcdlet-packages.XXXXXX)
trap 'rm -rf "$work"' EXIT

# A static binary: CGO_ENABLED=0; -trimpath keeps the build directory out of
# it, so it does not depend on where the checkout is; -s -w leave out the
# symbol table and DWARF (panics still print function names and lines).
build() { # GOARCH OUTPUT
	log "building etcdlet $version for linux/$1"
	CGO_ENABLED=0 GOOS=linux GOARCH=$1 GOFLAGS=${GOFLAGS:-} \
		"$GO" build -trimpath -ldflags "-s -w -X main.version=$version" -o "$2" ./cmd/etcdlet ||
		fail "go build for linux/$1 failed"
}

# Man pages and completions come from a binary that runs here, with the same
# command tree as the packaged ones.
host_arch=$("$GO" env GOHOSTARCH)
for arch in $arches; do
	mkdir -p "$work/$arch"
	build "$arch" "$work/$arch/etcdlet"
done
if [ -x "$work/$host_arch/etcdlet" ]; then
	docs_bin=$work/$host_arch/etcdlet
else
	docs_bin=$work/host-etcdlet
	build "$host_arch" "$docs_bin"
fi
mkdir -p "$work/docs"
"$docs_bin" gen-docs --man "$work/docs/man" --completions "$work/docs/completions" ||
	fail "etcdlet gen-docs failed"
# -n: no file name or time in the gzip header, -9 as Debian policy asks.
gzip -9n "$work/docs/man/"*.1
# The operator's documentation, where --help and the man pages point
# (/usr/share/doc/etcdlet): the README, every page of docs/ but the one for
# contributors, and the example configurations.
mkdir -p "$work/docs/doc/examples"
# The links point into the repository (docs/x.md, config/examples/,
# deploy/); installed, they point where those are installed beside the pages
# (deploy/ too). Links to what only a checkout has (the contributors' page,
# the build scripts) keep their text and lose the link.
sed -e 's#](docs/#](#g' -e 's#](config/examples/)#](examples/)#g' \
	-e '/^- \[Development\]/,/^$/{/^$/!d;}' README.md >"$work/docs/doc/README.md"
for page in docs/*.md; do
	[ "$page" = docs/development.md ] && continue
	sed -e 's#](\.\./config/examples/#](examples/#g' -e 's#](\.\./deploy/#](deploy/#g' \
		-e 's#\[\([^]]*\)\](\(development\.md\|\.\./hack/\|\.\./packaging/\)[^)]*)#\1#g' \
		"$page" >"$work/docs/doc/$(basename "$page")"
done
cp config/examples/*.yaml "$work/docs/doc/examples/"

files=()
for arch in $arches; do
	ln -s ../docs/man "$work/$arch/man"
	ln -s ../docs/completions "$work/$arch/completions"
	ln -s ../docs/doc "$work/$arch/doc"
	for packager in deb rpm; do
		out=$(ETCDLET_PKG_VERSION=$version ETCDLET_PKG_RELEASE=$release ETCDLET_PKG_ARCH=$arch \
			ETCDLET_PKG_STAGE=$work/$arch ETCDLET_PKG_CONFIG=$config \
			"$nfpm" package --config packaging/nfpm.yaml --packager "$packager" --target "$dist/" 2>&1) ||
			fail "nfpm package --packager $packager for $arch failed: $out"
		# nfpm prints "created package: PATH".
		file=$(sed -n 's/^.*created package: //p' <<<"$out" | tail -n1)
		[ -f "$file" ] || fail "nfpm did not say which file it wrote: $out"
		files+=("$file")
	done
done
log "built ${#files[@]} packages of etcdlet $version-$release in $((SECONDS - start)) s"
printf '%s\n' "${files[@]}"
