//go:build tools

// Package druidbuild pins the etcd-druid operator for hack/druid.sh, which
// builds its command from this module: `go install pkg@version` cannot,
// because the operator's go.mod replaces its api module with a local path.
package druidbuild

import _ "github.com/gardener/etcd-druid/cmd"
