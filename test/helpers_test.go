package test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"slices"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdlet/etcdlet/test/harness"
)

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// requireTools fails the test when a program is missing, naming the Debian
// package that has it.
func requireTools(t *testing.T, programs map[string]string) {
	t.Helper()
	for _, prog := range slices.Sorted(maps.Keys(programs)) {
		if _, err := exec.LookPath(prog); err != nil {
			t.Fatalf("%s not found in PATH: apt-get install -y --no-install-recommends %s (hack/test-deps.sh installs it)", prog, programs[prog])
		}
	}
}

// memberIDOf returns the member ID of agent n's member (by name).
func memberIDOf(t *testing.T, c *harness.Cluster, cli *clientv3.Client, n int) uint64 {
	t.Helper()
	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.Name == c.Name(n) {
			return m.ID
		}
	}
	t.Fatalf("%s is not a member", c.Name(n))
	return 0
}

// waitQuorum waits until the members left elect a leader: until then a
// command refuses for another reason (no quorum right now).
func waitQuorum(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	harness.Eventually(t, convergeTimeout, "a leader among the members left", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cli.Get(ctx, "quorum-check") // linearizable: needs a leader and quorum
		return err
	})
}

// leaderIndex returns which agent's member leads.
func leaderIndex(t *testing.T, c *harness.Cluster, cli *clientv3.Client) int {
	t.Helper()
	members, err := c.MemberList(cli)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s, err := cli.Status(ctx, m.ClientURLs[0])
		cancel()
		if err != nil || s.Leader == 0 {
			continue
		}
		for _, l := range members {
			if l.ID == s.Leader {
				for n := 1; n <= 9; n++ {
					if c.Name(n) == l.Name {
						return n
					}
				}
			}
		}
	}
	t.Fatal("no leader found")
	return 0
}

// plainClientRefused checks that a TLS client that trusts the CA but shows
// no certificate cannot read from the member.
func plainClientRefused(endpoint, ca string) error {
	tlsConfig, err := transport.TLSInfo{TrustedCAFile: ca}.ClientConfig()
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: time.Second, TLS: tlsConfig, Logger: zap.NewNop()})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := cli.Get(ctx, "/"); err == nil {
		return errorf("a client without a certificate could read from %s", endpoint)
	}
	return nil
}

// waitMetric waits until the agent's metric satisfies ok. A metric moves
// just after the event a test waits for (a file written, an object
// served), so it is read until it agrees, never once.
func waitMetric(t *testing.T, a *harness.Agent, name, want string, ok func(float64) bool) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s", name, want), func() error {
		v, err := a.Metric(name)
		if err != nil {
			return err
		}
		if !ok(v) {
			return errorf("%s = %v, want %s", name, v, want)
		}
		return nil
	})
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }

func equals(n float64) func(float64) bool { return func(v float64) bool { return v == n } }

// etcdlet runs the built etcdlet and returns its stdout, stderr and exit code.
func etcdlet(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("etcdlet %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}
