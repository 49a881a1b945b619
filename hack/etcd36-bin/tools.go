//go:build tools

// Package etcd36build pins etcd 3.6's server for hack/etcd36.sh, which
// builds its etcd command (the module's root package) from this module.
package etcd36build

import _ "go.etcd.io/etcd/server/v3"
