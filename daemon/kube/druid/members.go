package druid

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"

	druidv1alpha1 "github.com/gardener/etcd-druid/api/core/v1alpha1"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
	"github.com/etcdlet/etcdlet/daemon/kube"
	"github.com/etcdlet/etcdlet/daemon/memberlist"
)

// AddressKeeper is the members.source etcd-resource: it checks the Etcd's
// spec.externallyManagedMemberAddresses with the rules every member list
// must pass and writes a good list to the agent's copy
// (config.EtcdResourceMembers), which the member list source watches like
// a members file. A bad list is refused, with its reasons, and the copy
// keeps the last good one: the agent goes on with it, also across restarts
// and while the API server is away.
type AddressKeeper struct {
	// Rules returns the list rules in force. A reload replaces them
	// whole, so each call may return others: OnEtcd takes them once and
	// uses them throughout.
	Rules    func() config.ListRules
	Log      *slog.Logger
	Recorder kube.Recorder
	// refused is the last list refused, so that it is reported once.
	refused string

	mu sync.Mutex
	// err says why the resource's current list is refused, nil when it
	// is in force.
	err error
}

// Err says why the Etcd's current list is not in force (refused, or not
// kept), nil when it is. Safe to call from any goroutine.
func (k *AddressKeeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

func (k *AddressKeeper) setErr(err error) {
	k.mu.Lock()
	k.err = err
	k.mu.Unlock()
}

// OnEtcd takes in a version of the resource (from one goroutine).
func (k *AddressKeeper) OnEtcd(e *druidv1alpha1.Etcd) {
	rules := k.Rules()
	addrs, err := k.check(rules, e)
	if err != nil {
		k.setErr(err)
		// Bracketed, so that an empty list is a key of its own.
		key := "[" + strings.Join(e.Spec.ExternallyManagedMemberAddresses, ",") + "]"
		if key != k.refused {
			k.refused = key
			k.Log.Error("member list of the Etcd resource refused; the last good list stays in force",
				"etcd", e.Namespace+"/"+e.Name, "resourceVersion", e.ResourceVersion, "problems", err.Error())
			k.Recorder.Eventf(corev1.EventTypeWarning, kube.ReasonMemberListRefused,
				"spec.externallyManagedMemberAddresses refused, the last good list stays in force: %v", err)
		}
		return
	}
	k.refused = ""
	err = k.keep(rules.EtcdResourceMembers(), e, addrs)
	k.setErr(err)
	if err != nil {
		k.Log.Error("member list of the Etcd resource not kept", "path", rules.EtcdResourceMembers(), "error", err)
	}
}

// check applies the rules of every member list (config.ListRules.CheckList). An Etcd
// in druid-managed mode has no list: that is refused too, rather than read
// as "no members".
func (k *AddressKeeper) check(rules config.ListRules, e *druidv1alpha1.Etcd) ([]string, error) {
	list := e.Spec.ExternallyManagedMemberAddresses
	where := fmt.Sprintf("Etcd %s/%s spec.externallyManagedMemberAddresses", e.Namespace, e.Name)
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: empty: the Etcd is not in externally managed mode, so it names no members", where)
	}
	entries := make([]config.AddressEntry, len(list))
	for i, a := range list {
		entries[i] = config.AddressEntry{Where: fmt.Sprintf("%s[%d]", where, i), Text: a}
	}
	addrs, errs := rules.CheckList(where, entries)
	if len(errs) > 0 {
		return nil, errs
	}
	if r := e.Spec.Replicas; int(r) != len(addrs) {
		// The CRD's CEL rule enforces this; a CRD without CEL does not.
		return nil, fmt.Errorf("%s: %d entries, but spec.replicas is %d", where, len(addrs), r)
	}
	return identity.AddrStrings(addrs), nil
}

// keep writes the copy at path when its addresses differ from list. The
// header says where the list came from; the member list source ignores it.
func (k *AddressKeeper) keep(path string, e *druidv1alpha1.Etcd, list []string) error {
	header := fmt.Sprintf("# The member list of Etcd %s/%s (spec.externallyManagedMemberAddresses),\n"+
		"# resourceVersion %s, kept by etcdlet for when the API server is away. Do not edit:\n"+
		"# edit the Etcd resource.\n", e.Namespace, e.Name, e.ResourceVersion)
	wrote, err := memberlist.KeepCopy(path, header, list)
	if err != nil {
		return fmt.Errorf("keep the Etcd's member list: %w", err)
	}
	if wrote {
		k.Log.Info("member list of the Etcd resource kept", "etcd", e.Namespace+"/"+e.Name, "resourceVersion", e.ResourceVersion, "members", list)
	}
	return nil
}
