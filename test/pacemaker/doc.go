// Package pacemaker holds etcdlet's end-to-end test of the pacemaker
// collector against a live two-node corosync + pacemaker cluster, run in
// network, mount, UTS and PID namespaces on this host (root required).
//
//	go test ./test/pacemaker/...
package pacemaker
