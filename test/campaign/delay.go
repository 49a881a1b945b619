package campaign

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcdlet/etcdlet/test/harness"
)

// delayPort is where each host's delay proxy listens, in front of its
// member's peer port (2380).
const delayPort = 32380

// delays are the hosts' delay proxies (test/campaign/delayproxy): every
// peer connection into a host goes through the proxy in the host's
// namespace from the start (an nftables redirect of port 2380), so that a
// delay fault slows the connections that exist, not only new ones. The
// partitions still apply: the redirect keeps the packets' source.
type delays struct {
	procs   map[int]*exec.Cmd
	exited  map[int]chan struct{}
	control map[int]string
}

// startDelays builds the proxy and starts one in every host's namespace.
func (cp *campaign) startDelays(dir string) *delays {
	t := cp.t
	bin, err := harness.Build(dir, "./test/campaign/delayproxy")
	if err != nil {
		t.Fatal(err)
	}
	d := &delays{procs: map[int]*exec.Cmd{}, exited: map[int]chan struct{}{}, control: map[int]string{}}
	for n := 1; n <= hosts; n++ {
		d.control[n] = filepath.Join(dir, fmt.Sprintf("delay-%d", n))
		cmd := exec.Command("ip", "netns", "exec", cp.ns(n), bin,
			"-from", fmt.Sprintf("tcp://%s:%d", hostAddr(n), delayPort),
			"-to", fmt.Sprintf("tcp://%s:2380", hostAddr(n)), "-control", d.control[n])
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatalf("start host %d's delay proxy: %v", n, err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); <-exited })
		if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
			t.Fatalf("host %d's delay proxy did not start: %q", n, line)
		}
		d.procs[n], d.exited[n] = cmd, exited
		cp.must(cp.net.nft(n, fmt.Sprintf(`table ip campaign-delay {
	chain prerouting { type nat hook prerouting priority dstnat; iifname "eth0" tcp dport 2380 redirect to :%d; }
}
`, delayPort)))
	}
	return d
}

// delay slows host n's peer traffic by latency ± a fifth of it, both
// ways, until undelay.
func (d *delays) delay(n int, latency time.Duration) error {
	jitter := latency / 5
	if err := os.WriteFile(d.control[n], []byte(latency.String()+" "+jitter.String()+"\n"), 0o600); err != nil {
		return err
	}
	return d.procs[n].Process.Signal(syscall.SIGUSR1)
}

func (d *delays) undelay(n int) error { return d.procs[n].Process.Signal(syscall.SIGUSR2) }

// delayProxiesCarry fails the test unless every listed host's delay
// proxy carries peer connections: a delay through a proxy that nothing
// goes through would test nothing.
func (cp *campaign) delayProxiesCarry() {
	for _, n := range cp.list {
		out, err := exec.Command("ip", "netns", "exec", cp.ns(n), "ss", "-Htn", "state", "established", fmt.Sprintf("( sport = :%d )", delayPort)).CombinedOutput()
		if err != nil {
			cp.t.Fatalf("ss in host %d's namespace: %v: %s", n, err, out)
		}
		if strings.TrimSpace(string(out)) == "" {
			cp.t.Fatalf("host %d's delay proxy carries no peer connection: the redirect of port 2380 did not take", n)
		}
	}
}

// check says which proxies exited: their hosts were cut off since.
func (d *delays) check() []string {
	var out []string
	for n := 1; n <= hosts; n++ {
		select {
		case <-d.exited[n]:
			out = append(out, "host "+strconv.Itoa(n)+"'s delay proxy exited: the campaign's own fault, its results are void")
		default:
		}
	}
	return out
}
