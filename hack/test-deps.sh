#!/usr/bin/env bash
# Installs or checks what `make test` needs. Never skips silently: a missing
# piece that cannot be installed here is an error that says how to get it.
set -euo pipefail

need_root_msg="the tests create network namespaces (netlink address detection) and need root: run 'sudo make test'"
if [ "$(id -u)" -ne 0 ]; then
  echo "test-deps: $need_root_msg" >&2
  exit 1
fi

if ! command -v go >/dev/null; then
  echo "test-deps: Go is not installed; install Go 1.26 from https://go.dev/dl/" >&2
  exit 1
fi

# Go modules (also what the end-to-end tests build from).
go mod download
