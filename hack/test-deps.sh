#!/usr/bin/env bash
# Installs, then checks, every program the tests run. Never skips silently:
# a missing piece that cannot be installed here is an error that says how
# to get it.
#
# The table below is the one list of what the tests execute (exec.Command,
# exec.LookPath, and what those programs start in turn). A test that gains
# a program adds it here; `make test` on a fresh machine proves the list.
#
# Besides these Debian programs, the tests run programs built from the Go
# module proxy into ${ETCDLET_CACHE:-$HOME/.cache/etcdlet} by hack/test.sh
# (and the Makefile's ASSETS), each found through an environment variable:
# kube-apiserver and etcd (hack/envtest.sh, KUBEBUILDER_ASSETS), etcd-druid
# (hack/druid.sh, ETCDLET_DRUID), versitygw (hack/versitygw.sh,
# ETCDLET_VERSITYGW), etcdbrctl (hack/etcdbrctl.sh, ETCDLET_ETCDBRCTL), an
# etcd 3.5 and an etcd 3.6 server (hack/etcd35.sh, ETCDLET_ETCD35; hack/etcd36.sh,
# ETCDLET_ETCD36; both hack/etcd-release.sh) and
# promtool, which checks the alert rules in deploy/prometheus/
# (hack/promtool.sh, ETCDLET_PROMTOOL). They need Go and the proxy, nothing
# from apt.
# nfpm, the packager (hack/nfpm.sh, ETCDLET_NFPM), is built the same way;
# hack/debian-root.sh (ETCDLET_DEBIAN_ROOT) debootstraps the Debian root the
# package install test boots once, from the Debian mirror (debootstrap below).
set -euo pipefail
source "$(dirname "$0")/lib/toolchain.sh"

fail() { echo "test-deps: $*" >&2; exit 1; }

command -v go >/dev/null || fail "Go is not installed; install Go from https://go.dev/dl/ (any recent version: $GOTOOLCHAIN, which go.mod names, is then fetched through the Go module proxy)"
[ "$(id -u)" -eq 0 ] || fail "the tests create network namespaces and run a live corosync/pacemaker cluster; run 'sudo make test'"

# program            Debian package        who runs it
tools=(
  "crm_mon             pacemaker-cli-utils   daemon/pacemaker, test/: crm_mon over fixture CIBs"
  "cibadmin            pacemaker-cli-utils   test/pacemaker: the live cluster's CIB"
  "crm_simulate        pacemaker-cli-utils   daemon/pacemaker/testdata/generate.sh"
  "crm_attribute       pacemaker-cli-utils   daemon/pacemaker/testdata/generate.sh"
  "crm_resource        pacemaker-cli-utils   daemon/pacemaker/testdata/generate.sh"
  "pacemakerd          pacemaker             test/pacemaker: the live cluster"
  "corosync            corosync              test/pacemaker: the live cluster"
  "corosync-cmapctl    corosync              test/pacemaker: the live cluster"
  "fence_dummy         fence-agents          test/pacemaker: the live cluster's fencing devices"
  "python3             python3               fence_dummy is a Python program"
  "xmllint             libxml2-utils         daemon/pacemaker/testdata/generate.sh"
  "ip                  iproute2              test/: network namespaces"
  "ss                  iproute2              test/campaign: the delay proxies carry the hosts' peer connections"
  "nft                 nftables              test/campaign: partitions, packet loss and the delay proxies' redirect inside the hosts' namespaces"
  "unshare             util-linux            test/pacemaker: node namespaces"
  "nsenter             util-linux            test/pacemaker: polling inside a node; test/: commands in the booted Debian host"
  "mount               mount                 test/: a data dir that must be a mount point"
  "umount              mount                 test/: a data dir that must be a mount point"
  "systemd-analyze     systemd               systemd/: 'systemd-analyze verify' of the units"
  "debootstrap         debootstrap           hack/debian-root.sh: the pristine Debian root the package install test boots"
  "systemd-nspawn      systemd-container     test/: boots that root with systemd as PID 1 (package install test)"
  "chroot              coreutils             test/: the package installed without systemd running"
  "tar                 tar                   test/: a fresh copy of the Debian root per run"
  "rpm                 rpm                   test/: rpm -qp, rpm -K of the built .rpm files"
  "dpkg-deb            dpkg                  test/: dpkg-deb -c/-I/-f of the built .deb files"
  "dpkg                dpkg                  test/: dpkg --compare-versions (the package version scheme)"
  "gzip                gzip                  hack/packages.sh: the man pages"
  "openssl             openssl               pki/: CAs made as docs/certificates.md shows, and openssl verify"
)

declare -A package_of=()
for row in "${tools[@]}"; do
  read -r tool package _ <<<"$row"
  package_of[$tool]=$package
done

# Installed with --no-install-recommends (a small, predictable set), so
# every package a test needs is named above, never left to a Recommends.
missing=()
for p in $(printf '%s\n' "${package_of[@]}" | sort -u); do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || fail "missing packages ${missing[*]} and no apt-get to install them"
  echo "test-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed; the tests need the Debian packages ${missing[*]}"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
    fail "apt-get install ${missing[*]} failed"
fi

# Check what the tests will look for, the way they look for it: in PATH.
problems=()
for row in "${tools[@]}"; do
  read -r tool package used <<<"$row"
  command -v "$tool" >/dev/null || problems+=("$tool not found in PATH (package $package; used by $used)")
done
# The pacemaker daemons of the live cluster run as hacluster.
getent passwd hacluster >/dev/null || problems+=("user hacluster missing (created by the pacemaker package)")
if [ ${#problems[@]} -gt 0 ]; then
  printf 'test-deps: %s\n' "${problems[@]}" >&2
  fail "install the packages named above: apt-get install -y --no-install-recommends $(printf '%s\n' "${package_of[@]}" | sort -u | tr '\n' ' ')"
fi

# Go modules (also what the end-to-end tests build from).
go mod download
