// Package envtest starts a real Kubernetes control plane (etcd and
// kube-apiserver, through controller-runtime's envtest) for tests, with the
// upstream CRDs etcdlet writes to: OpenShift's PacemakerCluster and
// etcd-druid's Etcd.
//
// The binaries are built from the Go module proxy by hack/envtest.sh and found
// through KUBEBUILDER_ASSETS:
//
//	KUBEBUILDER_ASSETS="$(hack/envtest.sh)" go test ./test/envtest/
//
// `make test` does this. A test that calls Start without the binaries fails
// (it does not skip) and says how to get them.
package envtest
