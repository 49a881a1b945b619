// Command pause is the pod sandbox's process in the kubelet tests
// (test/kubehost_test.go), a stand-in for registry.k8s.io/pause: it does
// nothing until it is told to stop. It also fills the images that kubeadm's
// preflight wants present but the tests never run.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
