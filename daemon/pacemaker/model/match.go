package model

import (
	"path"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
)

// Matcher selects the primitives that are one logical resource.
type Matcher struct {
	// Agent is a "class:[provider:]type" pattern; each part may use
	// path.Match wildcards ("ocf:*:podman-etcd"). Compared
	// case-insensitively, since pacemaker echoes it from the CIB.
	Agent string
	// IDs, when set, replace agent matching: a primitive matches when its
	// id, or the id of any container it is nested in, is listed.
	IDs []string
}

// Mapping says which resources are a node's Kubelet and Etcd.
type Mapping struct {
	Kubelet Matcher
	Etcd    Matcher
}

// String describes the matcher for messages.
func (m Matcher) String() string {
	if len(m.IDs) > 0 {
		return "resource ids " + strings.Join(m.IDs, ", ")
	}
	return "agent " + m.Agent
}

// Match reports whether p is selected. Fencing devices never match.
func (m Matcher) Match(p *crmmon.Primitive) bool {
	if p.Agent.IsStonith() {
		return false
	}
	if len(m.IDs) > 0 {
		if slices.Contains(m.IDs, baseID(p.ID)) {
			return true
		}
		for _, parent := range p.Parents {
			if slices.Contains(m.IDs, baseID(parent.ID)) {
				return true
			}
		}
		return false
	}
	return m.matchAgent(p.Agent.String())
}

func (m Matcher) matchAgent(agent string) bool {
	pattern := strings.ToLower(strings.ReplaceAll(m.Agent, "::", ":"))
	ok, err := path.Match(pattern, strings.ToLower(agent))
	return err == nil && ok
}

// baseID strips the ":<n>" instance suffix of unique clone instances and
// cloned groups ("cp:1"), so that configuration ids match.
func baseID(id string) string {
	if i := strings.LastIndexByte(id, ':'); i > 0 {
		return id[:i]
	}
	return id
}
