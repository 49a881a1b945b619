package test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcdlet/etcdlet/daemon/snapshot"
	"github.com/etcdlet/etcdlet/test/harness"
)

// backup-restore's API with client authentication on, as validate requires
// it off loopback: with backup.api.tls.caFile only a client with a
// certificate of that CA is answered (not an anonymous one, not one of
// another CA); with allowedClients (for etcd-druid, which presents no
// certificate) only a client from those networks gets a connection.
func TestBackupAPIAuthenticatesClients(t *testing.T) {
	t.Parallel()
	c := harness.NewCluster(t, binary, t.TempDir(), harness.Options{Net: netBackupAPIAuth})
	pki := c.Opts.TLS
	apiPort := freeLoopbackPort(t)
	store := t.TempDir()
	api := func(extra string) string {
		return fmt.Sprintf("backup:\n  store: {provider: local, directory: %s}\n  api: {port: %d, tls: {certFile: %s, keyFile: %s%s}\n",
			store, apiPort, pki.ServerCert, pki.ServerKey, extra)
	}
	c.Opts.Extra = api(", caFile: " + pki.CA + "}")
	c.WriteMembers(1)
	agent := c.Start(1)
	c.Wait(c.Client(), convergeTimeout, 1)
	url := "https://" + net.JoinHostPort(c.IP(1), strconv.Itoa(apiPort)) + "/healthz"

	withCert, err := pki.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := harness.GenerateTLS(filepath.Join(t.TempDir(), "rogue"), []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	rogueCert, err := tls.LoadX509KeyPair(rogue.ClientCert, rogue.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]*tls.Config{
		"anonymous":         {RootCAs: withCert.RootCAs},
		"another CA's cert": {RootCAs: withCert.RootCAs, Certificates: []tls.Certificate{rogueCert}},
		"the CA's cert":     withCert,
	}
	harness.Eventually(t, convergeTimeout, "the API answers a client with a certificate of its CA", func() error {
		return apiGet(url, clients["the CA's cert"], nil)
	})
	for name, cfg := range clients {
		err := apiGet(url, cfg, nil)
		if allowed := name == "the CA's cert"; allowed != (err == nil) {
			t.Errorf("%s: %v (allowed: %t)", name, err, allowed)
		}
	}

	// For druid: no client certificate, an allow-list of networks.
	agent.Stop()
	c.Opts.Extra = api("}, allowedClients: [" + c.IP(5) + ", 127.0." + strconv.Itoa(netBackupAPIAuth) + ".128/25]")
	c.WriteConfig(1)
	c.Start(1)
	anonymous := clients["anonymous"]
	harness.Eventually(t, convergeTimeout, "the API answers an allowed client", func() error {
		return apiGet(url, anonymous, net.ParseIP(c.IP(5)))
	})
	for _, tc := range []struct {
		from    string
		allowed bool
	}{{c.IP(5), true}, {c.IP(200), true}, {c.IP(6), false}, {c.IP(1), false}, {"127.0.0.1", false}} {
		err := apiGet(url, anonymous, net.ParseIP(tc.from))
		if tc.allowed != (err == nil) {
			t.Errorf("a client from %s: %v (allowed: %t)", tc.from, err, tc.allowed)
		}
	}
}

// apiGet gets url over https from the source address from (any when nil)
// and wants a 200.
func apiGet(url string, cfg *tls.Config, from net.IP) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if from != nil {
		dialer.LocalAddr = &net.TCPAddr{IP: from}
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, TLSClientConfig: cfg.Clone()}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// No sequence of API requests destroys backup history or starves the
// schedule. The store holds three days of hourly snapshots, as a schedule
// leaves them; the agent's schedule takes a full snapshot every minute and
// prunes by the default (exponential) policy. Then 50 requests for a full
// snapshot at once all get the scheduled one, just taken (one in flight
// at most, none within a minute of the last), and the store keeps every
// snapshot it had; then, while clients order delta after delta, the next
// scheduled full snapshot is still taken within its interval.
func TestBackupAPIRequestsKeepHistoryAndSchedule(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	planted := plantHistory(t, dir, 3*24)
	apiPort := freeLoopbackPort(t)
	backup := fmt.Sprintf("backup:\n  store: {provider: local, directory: %s}\n  api: {port: %d}\ntasks:\n  requeueInterval: 1s\n", dir, apiPort)
	c, cli := startCluster(t, netBackupHistory, 1, func(o *harness.Options) {
		o.Extra = backup
		o.Insecure = "the API on loopback needs no TLS; the test is about what requests can do, not who may make them"
	})
	// The planted history ends at revision 2*72+1: the cluster goes past
	// it before its first snapshot, as the cluster that left it had.
	putKeys(t, cli, "before/", 200)
	c.Agent(1).Stop()
	c.Opts.Extra = strings.Replace(backup, "  api:", "  schedule: {full: 1m}\n  api:", 1)
	c.WriteConfig(1)
	start := time.Now()
	c.Start(1)
	store, err := snapshot.NewLocalStore(dir, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	fullsSince := func(since time.Time) []snapshot.Snapshot {
		list, err := store.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		var out []snapshot.Snapshot
		for _, s := range list {
			if s.Kind == snapshot.KindFull && !s.CreatedOn.Before(since.Truncate(time.Second)) {
				out = append(out, s)
			}
		}
		return out
	}
	var scheduled snapshot.Snapshot
	harness.Eventually(t, 2*time.Minute, "the first scheduled full snapshot, stored and pruned", func() error {
		fulls := fullsSince(start)
		if len(fulls) == 0 || c.Agent(1).CountLog("task Succeeded", map[string]string{"type": "snapshot"}) == 0 {
			return fmt.Errorf("none yet")
		}
		scheduled = fulls[0]
		return nil
	})
	kept := storeNames(t, store)
	// The planted fulls of the last 23 hours are each the newest of an
	// hour within the last day (the 24th is 24 hours and some minutes old).
	for _, name := range planted[len(planted)-23:] {
		if !kept[name] {
			t.Errorf("the schedule's pruning dropped %s, of the last day", name)
		}
	}

	base := "http://" + net.JoinHostPort(c.IP(1), strconv.Itoa(apiPort))
	var wg sync.WaitGroup
	answers := make([]string, 50)
	for i := range answers {
		wg.Go(func() {
			resp, err := http.Post(base+"/snapshot/full", "", nil)
			if err != nil {
				answers[i] = err.Error()
				return
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			var s snapshot.Snapshot
			if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &s) != nil {
				answers[i] = fmt.Sprintf("%s %s", resp.Status, resp.Header.Get("X-Etcdlet-Error"))
				return
			}
			answers[i] = s.SnapName
		})
	}
	wg.Wait()
	for i, a := range answers {
		if a != scheduled.SnapName {
			t.Errorf("request %d got %s, want the scheduled snapshot %s, taken less than a minute before", i, a, scheduled.SnapName)
		}
	}
	after := storeNames(t, store)
	for name := range kept {
		if !after[name] {
			t.Errorf("%s was lost to 50 API requests", name)
		}
	}
	if len(after) != len(kept) {
		t.Errorf("the store went from %d to %d snapshots; the requests should have added none", len(kept), len(after))
	}

	// Clients order delta after delta while the cluster is written to.
	hammer := time.Now()
	stop := make(chan struct{})
	var refused, taken sync.Map
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = cli.Put(t.Context(), "hammer/key", time.Now().String()) // events for the deltas
				resp, err := http.Post(base+"/snapshot/delta", "", nil)
				if err != nil {
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body) // drained for the connection's reuse; only the status counts
				resp.Body.Close()
				if resp.StatusCode == http.StatusServiceUnavailable {
					refused.Store(resp.Header.Get("X-Etcdlet-Error"), true)
				} else {
					taken.Store(resp.Status, true)
				}
			}
		})
	}
	harness.Eventually(t, 2*time.Minute, "the next scheduled full snapshot while the API is hammered with deltas", func() error {
		for _, f := range fullsSince(scheduled.CreatedOn) {
			if f.SnapName != scheduled.SnapName {
				return nil
			}
		}
		return fmt.Errorf("no full snapshot since the hammering began %s ago", time.Since(hammer).Round(time.Second))
	})
	close(stop)
	wg.Wait()
	var reasons []string
	refused.Range(func(k, _ any) bool { reasons = append(reasons, k.(string)); return true })
	t.Logf("API delta requests refused while the schedule waited: %s", strings.Join(reasons, "; "))
	final := storeNames(t, store)
	for name := range kept {
		if !final[name] {
			t.Errorf("%s was lost while the API was hammered", name)
		}
	}
}

// plantHistory puts into the local store at dir what an hourly schedule
// leaves over hours: a full snapshot every hour with a delta half an hour
// after it, the newest an hour old, at revisions 2 to 2*hours+1. It
// returns the fulls' names, oldest first.
func plantHistory(t *testing.T, dir string, hours int) []string {
	t.Helper()
	store, err := snapshot.NewLocalStore(dir, "etcd-main")
	if err != nil {
		t.Fatal(err)
	}
	var fulls []string
	now := time.Now().Truncate(time.Hour)
	for h := hours; h >= 1; h-- {
		at := now.Add(-time.Duration(h) * time.Hour)
		rev := int64(2 * (hours - h + 1))
		full := fmt.Sprintf("Full-00000000-%08d-%d.gz", rev, at.Unix())
		delta := fmt.Sprintf("Incr-%08d-%08d-%d.gz", rev+1, rev+1, at.Add(30*time.Minute).Unix())
		for _, name := range []string{full, delta} {
			s, err := snapshot.ParseName(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Put(t.Context(), s, strings.NewReader("planted")); err != nil {
				t.Fatal(err)
			}
		}
		fulls = append(fulls, full)
	}
	return fulls
}

func storeNames(t *testing.T, store snapshot.Store) map[string]bool {
	t.Helper()
	list, err := store.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, s := range list {
		out[s.SnapName] = true
	}
	return out
}
