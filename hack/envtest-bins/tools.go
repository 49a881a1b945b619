//go:build tools

// The node binaries that hack/kube-node.sh builds from this module: the
// kubelet (it runs etcd's static pod in the end-to-end hosts) and kubeadm
// (the procedure in docs/kubeadm.md is tested with it). Importing them here
// is what makes `go mod tidy` record every module they need in go.sum;
// kube-apiserver needs no such line, its packages are all covered already.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
