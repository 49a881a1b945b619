#!/usr/bin/env bash
# Builds an etcd 3.5 server into the cache and prints its path (the
# environment variable ETCDLET_ETCD35 of the tests): hack/etcd-release.sh.
exec "$(dirname "${BASH_SOURCE[0]}")/etcd-release.sh" 3.5
