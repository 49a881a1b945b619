#!/usr/bin/env bash
# Downloads Debian's containerd and runc packages, the container runtime the
# real kubelet of test/kubelet_test.go uses inside the nspawn hosts (each
# host installs them with dpkg -i). They must suit the hosts' Debian 12
# (bookworm) root (hack/debian-root.sh), so they are fetched with this
# machine's apt, which must be bookworm's too.
#
# Prints the absolute path of the directory holding containerd_*.deb and
# runc_*.deb as its only stdout line, so callers can do:
#   ETCDLET_CONTAINERD_DEBS="$(hack/containerd-debs.sh)" go test -run TestStaticPodWithRealKubelet ./test/
# Progress and errors go to stderr.
#
# The directory is ${ETCDLET_CACHE:-$HOME/.cache/etcdlet}/containerd-debs/
# <suite>: outside the repository, so it survives `git clean`. The download
# (about 30 MB, a few seconds) is skipped when both files are there. It
# needs apt-get and the package lists (apt-get update).
set -euo pipefail

suite=bookworm

log() { echo "containerd-debs.sh: $*" >&2; }
fail() { log "error: $*"; exit 1; }

script_dir=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/cache.sh
. "$script_dir/lib/cache.sh"
cache_subdir containerd-debs
out_dir=$bin_root/$suite

have() { compgen -G "$out_dir/$1_*.deb" >/dev/null; }
if have containerd && have runc; then
	log "using cached packages in $out_dir"
	echo "$out_dir"
	exit 0
fi

command -v apt-get >/dev/null || fail "apt-get not found: the packages come from Debian $suite's archive through apt"
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ "$codename" = "$suite" ] ||
	fail "this machine's apt serves '$codename', the hosts are Debian $suite: download containerd and runc for $suite by hand into a directory and set ETCDLET_CONTAINERD_DEBS to it"

build_dir
log "apt-get download containerd runc"
# As root: the cache (under root's home) is not the _apt user's to write.
(cd "$tmp" && apt-get -o APT::Sandbox::User=root download containerd runc) >&2 ||
	fail "apt-get download containerd runc failed (see above); run apt-get update first"
[ -n "$(compgen -G "$tmp/containerd_*.deb")" ] && [ -n "$(compgen -G "$tmp/runc_*.deb")" ] ||
	fail "apt-get download left no containerd_*.deb and runc_*.deb in $tmp"

mkdir -p "$out_dir"
mv -f "$tmp"/*.deb "$out_dir/"
log "packages in $out_dir: $(cd "$out_dir" && echo *.deb)"
echo "$out_dir"
