// Package clusterlist is members.source cluster: the member list kept in
// the cluster's own keyspace (etcdclient.MemberListKey), so that every
// agent reads one list that cannot differ between hosts. The Keeper
// follows it on every agent and writes a good list to the agent's copy,
// which the member list source reads like a members file; Edit changes it
// from any host (etcdlet members add|remove|set) with a compare-and-swap
// on its revision.
package clusterlist

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"time"

	"github.com/etcdlet/etcdlet/config"
	"github.com/etcdlet/etcdlet/daemon/identity"
)

// Record is the stored list: the addresses, and what the last edit did.
type Record struct {
	Addresses []string `json:"addresses"`
	// Change is the last edit ("add 192.0.2.4"), By where it was made
	// (host and user), At when.
	Change string    `json:"change,omitempty"`
	By     string    `json:"by,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

// Stored is a record as read, with the revision it was last changed at
// (the compare-and-swap of the next edit).
type Stored struct {
	Record
	Revision int64
}

// Decode reads a stored value.
func Decode(value []byte) (Record, error) {
	var r Record
	if err := json.Unmarshal(value, &r); err != nil {
		return Record{}, fmt.Errorf("the stored member list is not etcdlet's: %w", err)
	}
	return r, nil
}

// Encode is the stored form of a record.
func (r Record) Encode() []byte {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // strings and a time: cannot fail
	}
	return b
}

// Check applies the rules every member list must pass (the members
// file's, config.ListRules.CheckList) to the stored addresses; where
// names the key and its revision in the errors.
func Check(rules config.ListRules, where string, addresses []string) ([]netip.Addr, error) {
	entries := make([]config.AddressEntry, len(addresses))
	for i, a := range addresses {
		entries[i] = config.AddressEntry{Where: fmt.Sprintf("%s[%d]", where, i), Text: a}
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("%s: empty: an empty list never removes members", where)
	}
	addrs, errs := rules.CheckList(where, entries)
	if len(errs) > 0 {
		return nil, errs
	}
	return addrs, nil
}

// SeedURLs are the client URLs of members.seeds (validated IPs; one that
// does not parse is skipped).
func SeedURLs(scheme identity.Scheme, seeds []string) []string {
	urls := make([]string, 0, len(seeds))
	for _, s := range seeds {
		if ip, err := netip.ParseAddr(s); err == nil {
			urls = append(urls, scheme.For(ip).ClientURL)
		}
	}
	return urls
}
