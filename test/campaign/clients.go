package campaign

import (
	"fmt"
	"time"

	"github.com/anishathalye/porcupine"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Clients is the campaign's client workload for another test that makes
// its own faults: clients doing puts, gets, deletes and compare-and-swaps
// on a few keys, every operation recorded, then checked as the campaign
// checks it (linearizable per key, the revision never going backwards).
type Clients struct {
	w *workload
}

// StartClients runs one client over each of clis until Check.
func StartClients(clis []*clientv3.Client, seed uint64) *Clients {
	w := &workload{hist: newHistory(), keys: keys, seed: seed, acked: map[string]bool{}, clients: clis}
	w.start()
	return &Clients{w: w}
}

// Check stops the clients, reads every key once more through cli (a read
// that fails is retried for up to 10s), and checks the history within
// timeout. It returns what it checked, and every violation found.
func (c *Clients) Check(cli *clientv3.Client, timeout time.Duration) (summary string, violations []string) {
	c.w.halt()
	hist := c.w.hist
	violations = readKeys(cli, hist, len(c.w.clients))
	ops := hist.operations()
	switch result, _ := checkLinearizable(ops, timeout); result {
	case porcupine.Illegal:
		violations = append(violations, fmt.Sprintf("the client history (%d operations) is not linearizable", len(ops)))
	case porcupine.Unknown:
		violations = append(violations, fmt.Sprintf("the linearizability check of %d operations did not finish within %s", len(ops), timeout))
	}
	if p := revisionWentBack(ops); p != "" {
		violations = append(violations, "revision went backwards: "+p)
	}
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return fmt.Sprintf("%d operations (%d acknowledged writes, %d with an unknown outcome)", len(ops), len(c.w.acked), c.w.failed), violations
}
