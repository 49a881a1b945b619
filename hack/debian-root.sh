#!/usr/bin/env bash
# Builds a pristine Debian 12 (bookworm) root file system with systemd, the
# "control-plane host" the package install test (test/packages_test.go)
# boots with systemd-nspawn: debootstrap --variant=minbase with systemd,
# systemd-sysv, dbus and iproute2, packed into one tar file. Each test run
# unpacks a fresh copy, so a run never sees what an earlier one installed.
#
# Prints the absolute path of the tar file as its only stdout line, so
# callers can do:
#   ETCDLET_DEBIAN_ROOT="$(hack/debian-root.sh)" go test -run TestInstall ./test/
# Progress and errors go to stderr.
#
# The file is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/debian-root/
# <suite>-<hash of the recipe>/root.tar: outside the repository, so it
# survives `git clean`, and keyed by the recipe below, so that a change to it
# builds afresh. The build is skipped when the file is already there. It
# needs root, debootstrap (Debian package debootstrap) and the Debian mirror
# (ETCDLET_DEBIAN_MIRROR, default http://deb.debian.org/debian); the first
# build takes about 40 seconds and the file is about 250 MB.
set -euo pipefail

suite=bookworm
include=systemd,systemd-sysv,dbus,iproute2
mirror=${ETCDLET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# Bump when the steps after debootstrap change, so the cache key changes.
recipe_revision=1

log() { echo "debian-root.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
command -v sha256sum >/dev/null || fail "sha256sum not found (coreutils)"
key=$(printf '%s\n' "$suite" "$include" "$recipe_revision" | sha256sum | cut -c1-12)
cache_subdir debian-root
root_dir=$bin_root
out_dir=$root_dir/$suite-$key
tarball=$out_dir/root.tar

if [ -s "$tarball" ]; then
	log "using cached root $tarball"
	echo "$tarball"
	exit 0
fi

[ "$(id -u)" -eq 0 ] || fail "debootstrap needs root; run it as root (sudo make test does)"
command -v debootstrap >/dev/null ||
	fail "debootstrap not found in PATH: apt-get install -y --no-install-recommends debootstrap (or run hack/test-deps.sh)"

build_dir
log "debootstrap --variant=minbase --include=$include $suite from $mirror (about 40 s)"
start=$SECONDS
debootstrap --variant=minbase --include="$include" "$suite" "$tmp/root" "$mirror" >"$tmp/debootstrap.log" 2>&1 || {
	tail -n 30 "$tmp/debootstrap.log" >&2
	fail "debootstrap failed (log above); it needs the Debian mirror $mirror"
}
log "debootstrap took $((SECONDS - start)) s"

# The downloaded packages and the package lists are not needed to boot.
rm -rf "$tmp/root/var/cache/apt/archives/"*.deb "$tmp/root/var/lib/apt/lists/"*_Packages
# The install test runs dpkg without a terminal: no prompts, no pager.
printf 'APT::Get::Assume-Yes "true";\n' >"$tmp/root/etc/apt/apt.conf.d/90etcdlet-test"
# A host needs a name and /etc/hosts (minbase has none).
echo etcdlet-host >"$tmp/root/etc/hostname"
printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$tmp/root/etc/hosts"
[ -x "$tmp/root/usr/lib/systemd/systemd" ] || fail "the root has no /usr/lib/systemd/systemd; debootstrap did not install systemd"

tar --numeric-owner -C "$tmp/root" -cf "$tmp/root.tar" . || fail "cannot write $tmp/root.tar"
mkdir -p "$out_dir"
mv -f "$tmp/root.tar" "$tarball"
log "root at $tarball ($(du -h "$tarball" | cut -f1))"
echo "$tarball"
