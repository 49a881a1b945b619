#!/usr/bin/env bash
# Installs, then checks, every program the tests run. Never skips silently:
# a missing piece that cannot be installed here is an error that says how
# to get it.
#
# The table below is the one list of what the tests execute (exec.Command,
# exec.LookPath, and what those programs start in turn). A test that gains
# a program adds it here; `make test` on a fresh machine proves the list.
set -euo pipefail

fail() { echo "test-deps: $*" >&2; exit 1; }

command -v go >/dev/null || fail "Go is not installed; install Go 1.26 from https://go.dev/dl/"
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
  "unshare             util-linux            test/pacemaker: node namespaces"
  "nsenter             util-linux            test/pacemaker: polling inside a node"
  "mount               mount                 test/: a data dir that must be a mount point"
  "umount              mount                 test/: a data dir that must be a mount point"
  "systemd-analyze     systemd               systemd/: 'systemd-analyze verify' of the units"
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
