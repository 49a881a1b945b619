//go:build tools

// Package etcd35build pins etcd 3.5's server for hack/etcd35.sh, which
// builds its etcd command (the module's root package) from this module.
package etcd35build

import _ "go.etcd.io/etcd/server/v3"
