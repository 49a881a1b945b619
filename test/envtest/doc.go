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
// The real etcd-druid operator (StartDruid) is built the same way by
// hack/druid.sh and found through ETCDLET_DRUID:
//
//	ETCDLET_DRUID="$(hack/druid.sh)" KUBEBUILDER_ASSETS="$(hack/envtest.sh)" go test ./test/
//
// Env can also stop and restart its kube-apiserver (StopAPIServer,
// StartAPIServer) with every object kept, and write kubeconfigs for
// restricted identities (WriteKubeconfig).
//
// `make test` does all this. A test that calls Start or StartDruid without
// the binaries fails (it does not skip) and says how to get them.
package envtest
