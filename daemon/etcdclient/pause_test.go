package etcdclient_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/internal/etcdtest"
	"github.com/etcdlet/etcdlet/internal/eventually"
)

// The environment of the helper process TestAPausedHolderSendsNoCall runs.
const (
	pausedHolderEnv = "ETCDLET_TEST_PAUSED_HOLDER" // the endpoints, comma-separated
	pausedClusterID = "ETCDLET_TEST_PAUSED_CLUSTER"
	pausedPeerURL   = "ETCDLET_TEST_PAUSED_PEER_URL"
)

// pausedLockTTL is the helper's lease: short, so that a pause outlasts it.
const pausedLockTTL = 4 * time.Second

// Jepsen found etcd's locks unsafe under process pauses: a holder stopped
// after it checked its lock wakes up believing it still holds it. Here a
// real process takes the writer lock, confirms it (UnderLock) and is
// stopped (SIGSTOP) right before its membership call; its lease expires,
// another agent takes the lock; then it is continued and goes on with the
// call. The call must never reach the cluster: UnderLock gave it a
// deadline no later than the lease measured before the confirmation, the
// pause ran past it, and no call is sent on a context that is done.
func TestAPausedHolderSendsNoCall(t *testing.T) {
	members := etcdtest.Start(t, 3)
	endpoints := etcdtest.ClientURLs(members)
	clusterID := members[0].ClusterID()
	peerURL := "http://127.0.0.1:1" // never started: a learner that is only added

	helper := exec.Command(os.Args[0])
	helper.Env = append(os.Environ(), pausedHolderEnv+"="+strings.Join(endpoints, ","),
		pausedClusterID+"="+strconv.FormatUint(clusterID, 10), pausedPeerURL+"="+peerURL)
	stdin, err := helper.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = helper.Process.Kill(); _ = helper.Wait() })
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(prefix string) string {
		t.Helper()
		for {
			select {
			case line, ok := <-lines:
				if !ok {
					t.Fatalf("the helper ended before it said %q", prefix)
				}
				if strings.HasPrefix(line, prefix) {
					return line
				}
			case <-time.After(30 * time.Second):
				t.Fatalf("the helper did not say %q within 30s", prefix)
			}
		}
	}

	expect("confirmed")
	// Stopped between the confirmation and the call: its keep-alives stop
	// with it, its lease runs out, and another agent takes the lock.
	if err := helper.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	other := locker(t)
	took, err := eventually.Within(30*time.Second, 100*time.Millisecond, func() error {
		_, err := other.TryLock(context.Background(), endpoints, clusterID)
		return err
	})
	if err != nil {
		t.Fatalf("the paused holder's lock was not taken over within 30s: %v", err)
	}
	t.Logf("another agent took the lock %s after the holder was paused", took.Round(time.Millisecond))
	if _, err := fmt.Fprintln(stdin, "go"); err != nil {
		t.Fatal(err)
	}
	if err := helper.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	result := expect("call:")
	if result == "call: sent" {
		t.Errorf("the paused holder's call went through after its lease expired")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	resp, err := cli.MemberList(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range resp.Members {
		if len(m.PeerURLs) > 0 && m.PeerURLs[0] == peerURL {
			t.Fatalf("the paused holder's learner %s was added (the helper said %q)", peerURL, result)
		}
	}
	t.Logf("the woken holder: %s", result)
}

// TestMain runs the holder that TestAPausedHolderSendsNoCall pauses when
// the test binary is started as its helper process.
func TestMain(m *testing.M) {
	if os.Getenv(pausedHolderEnv) != "" {
		if err := pausedHolder(); err != nil {
			fmt.Fprintln(os.Stderr, "paused holder:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// pausedHolder takes the lock, confirms it and waits on its input right
// before its membership call: where the test pauses it.
func pausedHolder() error {
	clusterID, err := strconv.ParseUint(os.Getenv(pausedClusterID), 10, 64)
	if err != nil {
		return err
	}
	pool, err := etcdclient.NewPool(config.TLSFiles{}, 2*time.Second)
	if err != nil {
		return err
	}
	defer pool.Close()
	l := &etcdclient.SessionLocker{Pool: pool, TTL: pausedLockTTL, CallTimeout: 2 * time.Second}
	endpoints := strings.Split(os.Getenv(pausedHolderEnv), ",")
	lock, err := l.TryLock(context.Background(), endpoints, clusterID)
	if err != nil {
		return err
	}
	in := bufio.NewScanner(os.Stdin)
	err = etcdclient.UnderLock(context.Background(), lock, func(ctx context.Context) error {
		fmt.Println("confirmed")
		in.Scan() // where the pause lands: after the confirmation, before the call
		_, err := pool.MemberAddAsLearner(ctx, endpoints[0], os.Getenv(pausedPeerURL))
		return err
	})
	if err == nil {
		fmt.Println("call: sent")
		return nil
	}
	fmt.Printf("call: not sent: %v\n", err)
	return nil
}
