//go:build tools

// Package etcdbrctlbuild pins gardener/etcd-backup-restore for
// hack/etcdbrctl.sh, which builds its etcdbrctl command (the module's root
// package) from this module: `go install pkg@version` cannot, because its
// go.mod has a replace directive (and the proxy refuses its version list).
package etcdbrctlbuild

import _ "github.com/gardener/etcd-backup-restore"
