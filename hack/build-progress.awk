#!/usr/bin/awk -f
# Shortens `go build -v` output for a person waiting on it (make demo): a
# line when modules start to download, one per 100 packages compiled, and
# every other line (compiler errors) in full.
/^go: downloading / { if (!fetching++) print "   fetching Go modules..."; fflush(); next }
/^[A-Za-z0-9._~\/-]+$/ { if (++compiled % 100 == 0) { printf "   %d packages compiled...\n", compiled; fflush() } next }
{ print; fflush() }
