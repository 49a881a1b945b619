#!/usr/bin/env bash
# Installs or checks what `make test` needs. Never skips silently: a missing
# piece that cannot be installed here is an error that says how to get it.
set -euo pipefail

fail() { echo "test-deps: $*" >&2; exit 1; }

command -v go >/dev/null || fail "Go is not installed; install Go 1.26 from https://go.dev/dl/"
[ "$(id -u)" -eq 0 ] || fail "the tests create network namespaces and run a live corosync/pacemaker cluster; run 'sudo make test'"

# Debian packages: crm_mon, crm_simulate, cibadmin, corosync, pacemakerd and
# fence_dummy (pacemaker-cli-utils pulls them in), xmllint, and ip.
packages=(pacemaker-cli-utils libxml2-utils iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || fail "missing packages ${missing[*]} and no apt-get to install them"
  echo "test-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
for tool in crm_mon crm_simulate cibadmin corosync pacemakerd xmllint ip; do
  command -v "$tool" >/dev/null || fail "$tool not found after installing ${packages[*]}"
done

# Go modules (also what the end-to-end tests build from).
go mod download
