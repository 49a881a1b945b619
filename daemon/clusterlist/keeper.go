package clusterlist

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/etcdclient"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
)

// Keeper follows the list kept in the cluster and writes each good
// version to the agent's copy (config.ListRules.MembersFile), which the
// member list source watches. A bad list is refused with its reasons and
// the copy keeps the last good one: the agent goes on with it, also
// across restarts and while no member answers.
//
// Which cluster it reads: the one this node is pinned to; a node that
// belongs to none yet (a fresh host with only members.seeds) reads from
// the cluster its endpoints answer for, and reads nothing while they
// answer for more than one. An answer from another cluster is never
// taken, as for every other decision (the pinned-cluster contract).
type Keeper struct {
	// Rules returns the list rules in force (a reload replaces them).
	Rules func() config.ListRules
	// Dial returns a client balancing over endpoints, owned by the caller
	// (etcdclient.Pool.NewMulti).
	Dial func(endpoints []string) (*clientv3.Client, error)
	// Endpoints are the client URLs to read from: the listed members' and
	// the seeds'.
	Endpoints func() []string
	// Pinned is the cluster this node belongs to, 0 while none.
	Pinned func() uint64
	// CallTimeout bounds each call; Retry is the pause after the watch
	// ends or a read fails.
	CallTimeout, Retry time.Duration
	Log                *slog.Logger

	mu sync.Mutex
	// err says why the list in the cluster is not in force, nil when it
	// is; logged says which error was logged last, so that each is once.
	err    error
	logged string
}

// ErrNoList says that the cluster keeps no list yet.
var ErrNoList = errors.New("no member list stored in the cluster yet")

// Err says why the cluster's list is not in force (not read, refused,
// not kept), nil when it is. Safe to call from any goroutine.
func (k *Keeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *Keeper) setErr(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.err = err
	switch {
	case err == nil:
		k.logged = ""
	case err.Error() != k.logged:
		k.logged = err.Error()
		k.Log.Warn("cannot follow the member list kept in the cluster; the last good list stays in force", "error", err)
	}
}

// Run follows the list until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	for {
		err := k.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		var ended watchEnded
		if errors.As(err, &ended) {
			// The list read last is still the cluster's as far as anyone
			// knows (a member restarted, an election): read it again.
			k.Log.Debug("the watch of the member list ended; reading it again", "error", err)
		} else {
			k.setErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(k.Retry):
		}
	}
}

// follow reads the list and then watches it, until the watch ends or a
// read fails.
func (k *Keeper) follow(ctx context.Context) error {
	eps := k.Endpoints()
	if len(eps) == 0 {
		return errors.New("no endpoint to read the member list from: this host is not listed yet; set members.seeds to addresses of members")
	}
	cli, err := k.Dial(eps)
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	clusterID, err := k.cluster(ctx, cli, eps)
	if err != nil {
		return err
	}
	stored, err := k.read(ctx, cli, clusterID)
	if err != nil {
		return err
	}
	k.setErr(k.take(clusterID, stored))
	return k.watch(ctx, cli, clusterID, stored.Revision)
}

// cluster picks the cluster to read from (Choose) and keeps the client
// on its endpoints.
func (k *Keeper) cluster(ctx context.Context, cli *clientv3.Client, eps []string) (uint64, error) {
	id, answering, err := Choose(ctx, cli, eps, k.Pinned(), k.CallTimeout)
	if err != nil {
		return 0, err
	}
	cli.SetEndpoints(answering...)
	return id, nil
}

// Choose asks every endpoint which cluster it answers for and picks the
// pinned one, which some endpoint must answer for; or, while this node
// belongs to none (pinned 0), the only one the endpoints answer for. It
// returns the endpoints that answered for it.
func Choose(ctx context.Context, cli *clientv3.Client, eps []string, pinned uint64, timeout time.Duration) (uint64, []string, error) {
	byCluster := map[uint64][]string{}
	var silent []string
	for _, ep := range eps {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := cli.Status(callCtx, ep)
		cancel()
		if err != nil {
			silent = append(silent, ep)
			continue
		}
		byCluster[resp.Header.ClusterId] = append(byCluster[resp.Header.ClusterId], ep)
	}
	switch {
	case len(byCluster) == 0:
		return 0, nil, fmt.Errorf("no member answers at %s", strings.Join(silent, ", "))
	case pinned != 0:
		if answering, ok := byCluster[pinned]; ok {
			return pinned, answering, nil
		}
		return 0, nil, fmt.Errorf("no endpoint answers for cluster %x, which this node belongs to (%s); a list from another cluster is never taken", pinned, describe(byCluster))
	case len(byCluster) > 1:
		return 0, nil, fmt.Errorf("the endpoints answer for more than one cluster (%s): no list is read until this node belongs to one; check members.seeds", describe(byCluster))
	}
	var only uint64
	for only = range byCluster { // the one cluster that answers
	}
	return only, byCluster[only], nil
}

func describe(byCluster map[uint64][]string) string {
	var parts []string
	for id, eps := range byCluster {
		parts = append(parts, fmt.Sprintf("cluster %x at %s", id, strings.Join(eps, " ")))
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}

// read reads the stored list (linearizably). With no list stored, a node
// of the cluster that holds a good copy stores it, create-only (the
// founder's first list, written by etcdlet bootstrap --approve; the list
// in force when the cluster was restored under a new ID, or when someone
// deleted it); any other finds ErrNoList.
func (k *Keeper) read(ctx context.Context, cli *clientv3.Client, clusterID uint64) (Stored, error) {
	stored, found, err := Read(ctx, cli, clusterID, k.CallTimeout)
	if err != nil || found {
		return stored, err
	}
	if k.Pinned() != clusterID {
		return Stored{}, fmt.Errorf("%w (cluster %x): run 'etcdlet members set <IP>...' on a member", ErrNoList, clusterID)
	}
	rules := k.Rules()
	addrs, errs := rules.DesiredMembers()
	if len(errs) > 0 || len(addrs) == 0 {
		return Stored{}, fmt.Errorf("%w (cluster %x), and this node has no good copy to publish: run 'etcdlet members set <IP>...' on a member", ErrNoList, clusterID)
	}
	host, _ := os.Hostname()
	rec := Record{Addresses: identity.AddrStrings(addrs), Change: "published from the copy of " + host, By: host, At: time.Now().UTC()}
	rev, err := Commit(ctx, cli, clusterID, 0, rec, k.CallTimeout)
	if err != nil {
		return Stored{}, err
	}
	k.Log.Info("member list published to the cluster from this node's copy", "members", rec.Addresses, "revision", rev)
	return Stored{Record: rec, Revision: rev}, nil
}

// watch takes every new version of the list until the watch ends. The
// watch requires a leader, so that a member cut off from the others ends
// it instead of holding it silent.
func (k *Keeper) watch(ctx context.Context, cli *clientv3.Client, clusterID uint64, after int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	key := etcdclient.MemberListKey(clusterID)
	for resp := range cli.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(after+1)) {
		if err := resp.Err(); err != nil {
			return watchEnded{fmt.Errorf("watch %s: %w", key, err)}
		}
		if resp.Header.ClusterId != clusterID {
			return fmt.Errorf("watch %s: the endpoints answer for cluster %x, not %x", key, resp.Header.ClusterId, clusterID)
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				// Read again: a node of the cluster stores its copy again,
				// any other waits for a list (an empty one never removes
				// members).
				k.Log.Warn("the member list kept in the cluster was deleted; the last good list stays in force", "key", key, "revision", ev.Kv.ModRevision)
				return watchEnded{fmt.Errorf("the member list %s was deleted at revision %d", key, ev.Kv.ModRevision)}
			}
			rec, err := Decode(ev.Kv.Value)
			if err == nil {
				err = k.take(clusterID, Stored{Record: rec, Revision: ev.Kv.ModRevision})
			}
			k.setErr(err)
		}
	}
	return watchEnded{fmt.Errorf("watch %s ended", key)}
}

// watchEnded is a watch that ended without saying anything about the
// list (no leader, a member gone): it is read again.
type watchEnded struct{ error }

func (w watchEnded) Unwrap() error { return w.error }

// take checks a stored list and writes it to the copy when its addresses
// differ from the copy's.
func (k *Keeper) take(clusterID uint64, s Stored) error {
	rules := k.Rules()
	where := fmt.Sprintf("member list of cluster %x at revision %d", clusterID, s.Revision)
	addrs, err := Check(rules, where, s.Addresses)
	if err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	list := identity.AddrStrings(addrs)
	header := fmt.Sprintf("# The member list of cluster %x (members.source cluster), revision %d,\n"+
		"# kept by etcdlet for when no member answers. Do not edit: change the list\n"+
		"# with 'etcdlet members add|remove|set'.\n", clusterID, s.Revision)
	wrote, err := memberlist.KeepCopy(rules.MembersFile(), header, list)
	if err != nil {
		return fmt.Errorf("keep the cluster's member list: %w", err)
	}
	if wrote {
		k.Log.Info("member list from the cluster kept", "members", list, "revision", s.Revision, "change", s.Change, "by", s.By)
	}
	return nil
}

// FirstList writes the first list of the host that founds a cluster whose
// list is kept in the cluster, a list of itself, as its agent's copy:
// there is no cluster to read one from yet, and its agent stores the copy
// in the cluster it founds (Keeper.read). A copy already there is kept.
// Refused when a cluster answers at the seeds: this host joins that one.
func FirstList(ctx context.Context, rules config.ListRules, self netip.Addr, seeds []string,
	dial func([]string) (*clientv3.Client, error), timeout time.Duration) error {
	if !memberlist.NoCopyYet(rules) {
		return nil
	}
	if len(seeds) > 0 {
		cli, err := dial(seeds)
		if err != nil {
			return err
		}
		defer func() { _ = cli.Close() }()
		if id, answering, err := Choose(ctx, cli, seeds, 0, timeout); err == nil {
			return fmt.Errorf("cluster %x answers at members.seeds (%s): this host joins it; run 'etcdlet members add %s' on one of its members", id, strings.Join(answering, " "), self)
		}
	}
	_, err := memberlist.KeepCopy(rules.MembersFile(), "# The first member list, of the host that founds the cluster (etcdlet bootstrap\n"+
		"# --approve); its agent stores it in the cluster once it runs. Do not edit.\n", []string{self.String()})
	return err
}
