package config

import (
	"bufio"
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"

	"github.com/etcdlet/etcdlet/config/trust"
)

// ClusterMembersFile is where, under agent.stateDir, the agent keeps the
// last good list read from the cluster (members.source cluster), so that
// it keeps working while no member answers.
const ClusterMembersFile = "cluster-members"

// MaxMembersFileBytes bounds what etcdlet reads from a members file: a list
// of at most a few dozen IPs never comes near it, and a runaway file must
// not exhaust memory.
const MaxMembersFileBytes = 1 << 20

// AddressEntry is one entry of a member list as the user wrote it, with
// where it was written (for error messages).
type AddressEntry struct {
	Where string // "members.addresses[2]" or "members.file line 3"
	Text  string
}

// StaticEntries turns members.addresses into entries.
func StaticEntries(addresses []string) []AddressEntry {
	entries := make([]AddressEntry, len(addresses))
	for i, a := range addresses {
		entries[i] = AddressEntry{Where: fmt.Sprintf("members.addresses[%d]", i), Text: a}
	}
	return entries
}

// ParseMembersFile parses the members file format shared with etcd-druid's
// and Gardener's ENDPOINTS file: one IP per line; blank lines and "#"
// comments (whole-line or trailing) are ignored. Syntax problems are
// returned as FieldErrors; address rules are checked by ValidateAddressList.
func ParseMembersFile(data []byte) ([]AddressEntry, Errors) {
	var (
		entries []AddressEntry
		errs    Errors
		n       int // entries, including those not kept
	)
	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 4096), MaxMembersFileBytes)
	for line := 1; scanner.Scan(); line++ {
		raw := scanner.Bytes()
		if i := bytes.IndexByte(raw, '#'); i >= 0 {
			raw = raw[:i]
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		if n++; n > MaxMembers {
			continue // only counted: the list is refused as a whole below
		}
		text := string(raw)
		where := fmt.Sprintf("members.file line %d", line)
		if fields := strings.Fields(text); len(fields) > 1 {
			errs.add(where, text, "one address per line")
			continue
		}
		entries = append(entries, AddressEntry{Where: where, Text: text})
	}
	if err := scanner.Err(); err != nil {
		errs.add("members.file", nil, "unreadable: %v", err)
	}
	if n > MaxMembers {
		return nil, tooManyEntries("members.file", n)
	}
	return entries, errs
}

func tooManyEntries(listPath string, n int) Errors {
	return Errors{{Path: listPath, Value: fmt.Sprintf("%d entries", n),
		Rule: fmt.Sprintf("must have at most %d entries (etcd recommends at most 7 members: every write waits for a majority of them)", MaxMembers)}}
}

// ReadMembersFile reads and parses a members file. It never blocks (a
// FIFO or a device is refused at once) and refuses anything but a regular
// file of at most MaxMembersFileBytes.
func ReadMembersFile(path string) ([]AddressEntry, Errors) {
	data, err := ReadRegularFile(path, MaxMembersFileBytes)
	if err != nil {
		return nil, Errors{{Path: "members.file", Value: path, Rule: err.Error()}}
	}
	// The list decides who joins and whose data is moved aside: only root
	// may be able to change it. Checked after the read, which names what
	// is not a regular file, and before anything is acted on.
	if err := trust.Check(path); err != nil {
		return nil, Errors{{Path: "members.file", Value: path, Rule: untrusted(err)}}
	}
	return ParseMembersFile(data)
}

// ValidateAddressList applies the address-list rules of etcd-druid's
// externally managed members (see docs/config.md): every entry a valid IP
// in canonical form, usable as a member address, no duplicates, and, when
// replicas is set, exactly that many entries. listPath names the list as a
// whole for the length rule. The returned addresses are in list order; on
// any problem none are returned, so a bad list is never half-applied.
func ValidateAddressList(listPath string, entries []AddressEntry, replicas *int) ([]netip.Addr, Errors) {
	if len(entries) > MaxMembers {
		// Nothing more is checked: a runaway list is refused as a whole,
		// at a cost that does not grow with it.
		return nil, tooManyEntries(listPath, len(entries))
	}
	var errs Errors
	addrs := make([]netip.Addr, 0, len(entries))
	firstSeen := map[netip.Addr]string{}
	for _, e := range entries {
		addr, ok := checkAddress(&errs, e)
		if !ok {
			continue
		}
		if where, dup := firstSeen[addr]; dup {
			errs.add(e.Where, e.Text, "duplicate of %s", where)
			continue
		}
		firstSeen[addr] = e.Where
		addrs = append(addrs, addr)
	}
	// A replicas out of range is its own error (cluster.replicas); a length
	// rule against it would only add noise.
	if replicas != nil && *replicas >= 1 && *replicas <= MaxMembers && len(entries) != *replicas {
		errs.add(listPath, fmt.Sprintf("%d entries", len(entries)), "must have exactly cluster.replicas (%d) entries", *replicas)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return addrs, nil
}

// checkAddress validates one entry and returns its address.
func checkAddress(errs *Errors, e AddressEntry) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(e.Text)
	switch {
	case err != nil:
		errs.add(e.Where, e.Text, "must be an IPv4 or IPv6 address (%s)", parseReason(err))
	case addr.Zone() != "":
		errs.add(e.Where, e.Text, "must not carry an IPv6 zone")
	case addr.Is4In6():
		errs.add(e.Where, e.Text, "IPv4-mapped IPv6 addresses are ambiguous: write %s", addr.Unmap())
	case addr.String() != e.Text:
		errs.add(e.Where, e.Text, "must be in canonical form: write %s", addr)
	case addr.IsUnspecified(), addr.IsMulticast(), addr.Is4() && addr == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		errs.add(e.Where, e.Text, "must be a unicast address a member can listen on")
	case addr.Is6() && addr.IsLinkLocalUnicast():
		errs.add(e.Where, e.Text, "IPv6 link-local addresses need a zone, which etcd URLs cannot carry")
	default:
		return addr, true
	}
	return netip.Addr{}, false
}

// ListRules are the rules a member list is read and checked under: its
// source (members.*), cluster.replicas, and the transport rule of
// etcd.tls and etcd.insecure. A reload may change the first two; a
// ListRules is a value, so whoever holds one holds all of it, and a
// reload hands over a new one instead of writing into the one in use.
type ListRules struct {
	Members  Members
	Replicas *int // cluster.replicas; nil when unset
	// StateDir is agent.stateDir, where the Etcd resource's list is kept.
	StateDir string
	etcd     Etcd // for checkTransport
}

// ListRules are the configuration's list rules.
func (c *Config) ListRules() ListRules {
	return ListRules{Members: c.Members, Replicas: c.Cluster.Replicas, StateDir: c.Agent.StateDir, etcd: c.Etcd}
}

// DesiredMembers reads the member list from the configured source and
// validates it (ListRules.DesiredMembers).
func (c *Config) DesiredMembers() ([]netip.Addr, Errors) { return c.ListRules().DesiredMembers() }

// MembersFile is the file the list is read from (ListRules.MembersFile).
func (c *Config) MembersFile() string { return c.ListRules().MembersFile() }

// DesiredMembers reads the member list from the configured source and
// validates it. For the file source a missing or unreadable file is an
// error like any other: the caller keeps the last good list in force.
func (r ListRules) DesiredMembers() ([]netip.Addr, Errors) {
	switch r.Members.Source {
	case SourceStatic:
		return ValidateAddressList("members.addresses", StaticEntries(r.Members.Addresses), r.Replicas)
	case SourceFile, SourceEtcdResource, SourceCluster:
		entries, errs := ReadMembersFile(r.MembersFile())
		if len(errs) > 0 {
			return nil, errs
		}
		return r.CheckList("members.file", entries)
	default:
		return nil, Errors{{Path: "members.source", Value: r.Members.Source, Rule: "must be " + sourceNames}}
	}
}

// CheckList applies every rule a member list from outside the
// configuration must pass (ValidateAddressList, then TLS off loopback):
// the members file's, and the Etcd resource's before it is kept.
func (r ListRules) CheckList(listPath string, entries []AddressEntry) ([]netip.Addr, Errors) {
	addrs, errs := ValidateAddressList(listPath, entries, r.Replicas)
	if len(errs) == 0 {
		r.etcd.checkTransport(&errs, entries)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return addrs, nil
}

// MembersFile is the file the list is read from: members.file, or for
// members.source etcd-resource the copy of the Etcd's list that the agent
// keeps in agent.stateDir, and for members.source cluster the copy of the
// cluster's; "" for the static source.
func (r ListRules) MembersFile() string {
	switch r.Members.Source {
	case SourceFile:
		return r.Members.File
	case SourceEtcdResource:
		return r.EtcdResourceMembers()
	case SourceCluster:
		return filepath.Join(r.StateDir, ClusterMembersFile)
	}
	return ""
}

// parseReason is netip's explanation without its echo of the input:
// `ParseAddr("10.0.0.01"): IPv4 field has octet with leading zero`.
func parseReason(err error) string {
	msg := err.Error()
	if _, reason, ok := strings.Cut(msg, "): "); ok {
		return reason
	}
	return msg
}
