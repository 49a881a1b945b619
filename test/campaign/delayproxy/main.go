// Command delayproxy is the fault campaign's delay on a host's peer
// traffic (test/campaign): etcd's own fault proxy (go.etcd.io/etcd/pkg/v3/
// proxy, what etcd's robustness suite puts in its members' paths), run
// inside the host's network namespace, in front of its member's peer port.
// The kernel here has no netem, so delay comes from a proxy in the path.
//
//	delayproxy -from tcp://198.51.100.11:32380 -to tcp://198.51.100.11:2380 -control FILE
//
// SIGUSR1 reads "LATENCY JITTER" (Go durations) from FILE and delays the
// traffic both ways by LATENCY ± JITTER; SIGUSR2 ends the delay; SIGTERM
// stops the proxy. It prints "ready" once it accepts connections.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"go.etcd.io/etcd/pkg/v3/proxy"
	"go.uber.org/zap"
)

func main() {
	from := flag.String("from", "", "where to listen, tcp://HOST:PORT")
	to := flag.String("to", "", "where to forward, tcp://HOST:PORT")
	control := flag.String("control", "", "the file SIGUSR1 reads the delay from")
	flag.Parse()
	if err := run(*from, *to, *control); err != nil {
		fmt.Fprintln(os.Stderr, "delayproxy:", err)
		os.Exit(1)
	}
}

func run(from, to, control string) error {
	fromURL, err := url.Parse(from)
	if err != nil || fromURL.Host == "" {
		return fmt.Errorf("-from %q: want tcp://HOST:PORT", from)
	}
	toURL, err := url.Parse(to)
	if err != nil || toURL.Host == "" {
		return fmt.Errorf("-to %q: want tcp://HOST:PORT", to)
	}
	if control == "" {
		return fmt.Errorf("-control: required")
	}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGTERM, syscall.SIGINT)
	p := proxy.NewServer(proxy.ServerConfig{Logger: zap.NewNop(), From: *fromURL, To: *toURL})
	defer p.Close()
	select {
	case <-p.Ready():
	case err := <-p.Error():
		return err
	}
	// The proxy's accept loop sends every failure to dial the member (it
	// is down: killed, its data moved aside) into this channel and waits
	// until it is read: undrained, the first one stops the proxy for good
	// and cuts the host off. The peers dial again, as they would a member
	// that is down.
	go func() {
		for range p.Error() {
		}
	}()
	fmt.Println("ready")
	for sig := range signals {
		switch sig {
		case syscall.SIGUSR1:
			latency, jitter, err := readDelay(control)
			if err != nil {
				fmt.Fprintln(os.Stderr, "delayproxy:", err)
				continue
			}
			p.DelayTx(latency, jitter)
			p.DelayRx(latency, jitter)
		case syscall.SIGUSR2:
			p.UndelayTx()
			p.UndelayRx()
		default:
			return nil
		}
	}
	return nil
}

func readDelay(path string) (latency, jitter time.Duration, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, fmt.Errorf("%s: %q: want LATENCY JITTER", path, b)
	}
	if latency, err = time.ParseDuration(f[0]); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	if jitter, err = time.ParseDuration(f[1]); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return latency, jitter, nil
}
