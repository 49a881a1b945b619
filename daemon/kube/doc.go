// Package kube reports what etcdlet knows to Kubernetes: etcd-druid's
// member Leases, the OpenShift PacemakerCluster status, and Events. The
// API server runs on the very etcd cluster etcdlet manages, so it may be
// away for long: every target here is best-effort, retried with backoff
// in its own goroutine, and never blocks membership or the manifest.
//
// This package holds what the targets share: the client built from the
// configured kubeconfig (client.go), the reporting state of each target
// (target.go), backoff (backoff.go) and the event recorder (events.go).
// The targets live below it: druid (Lease renewal, the Etcd resource as
// address source and protection switch) and pacemakercluster.
package kube
