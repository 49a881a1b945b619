// Package corosync reads corosync's node list, the authoritative source of
// the addresses cluster nodes talk on, either from the running daemon's
// configuration map (`corosync-cmapctl nodelist.node`) or from
// corosync.conf.
package corosync

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Node is one nodelist entry.
type Node struct {
	Name string
	ID   string
	// Addrs are the ring (link) addresses in link order, ring0 first. They
	// are as configured: usually IPs, possibly host names.
	Addrs []string
}

// maxRings is corosync's limit of links per node (knet supports 8).
const maxRings = 8

type entry struct {
	name  string
	id    string
	rings [maxRings]string
}

func (e *entry) set(key, value string) {
	switch {
	case key == "name":
		e.name = value
	case key == "nodeid":
		e.id = value
	case strings.HasPrefix(key, "ring") && strings.HasSuffix(key, "_addr"):
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(key, "ring"), "_addr"))
		if err == nil && n >= 0 && n < maxRings {
			e.rings[n] = value
		}
	}
}

func (e *entry) node() Node {
	n := Node{Name: e.name, ID: e.id}
	for _, a := range e.rings {
		if a != "" {
			n.Addrs = append(n.Addrs, a)
		}
	}
	return n
}

// ParseCmap reads `corosync-cmapctl nodelist.node` output, lines of the
// form "nodelist.node.0.ring0_addr (str) = 192.0.2.1".
func ParseCmap(out []byte) ([]Node, error) {
	byIndex := map[int]*entry{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		lhs, value, ok := strings.Cut(line, " = ")
		if !ok {
			continue
		}
		key, _, _ := strings.Cut(lhs, " (")
		rest, ok := strings.CutPrefix(key, "nodelist.node.")
		if !ok {
			continue
		}
		idx, field, ok := strings.Cut(rest, ".")
		if !ok {
			continue
		}
		i, err := strconv.Atoi(idx)
		if err != nil {
			continue
		}
		e := byIndex[i]
		if e == nil {
			e = &entry{}
			byIndex[i] = e
		}
		e.set(field, strings.TrimSpace(value))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read corosync-cmapctl output: %w", err)
	}
	indexes := make([]int, 0, len(byIndex))
	for i := range byIndex {
		indexes = append(indexes, i)
	}
	slices.Sort(indexes)
	nodes := make([]Node, 0, len(indexes))
	for _, i := range indexes {
		nodes = append(nodes, byIndex[i].node())
	}
	return nodes, nil
}

// ParseConf reads the nodelist of a corosync.conf.
func ParseConf(data []byte) ([]Node, error) {
	var (
		stack []string // open sections, outermost first
		nodes []Node
		cur   *entry
	)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		switch {
		case strings.HasSuffix(line, "{"):
			section := strings.TrimSpace(strings.TrimSuffix(line, "{"))
			stack = append(stack, section)
			if slices.Equal(stack, []string{"nodelist", "node"}) {
				cur = &entry{}
			}
		case line == "}":
			if len(stack) == 0 {
				return nil, fmt.Errorf("corosync.conf line %d: unbalanced }", lineNo)
			}
			if cur != nil && slices.Equal(stack, []string{"nodelist", "node"}) {
				nodes = append(nodes, cur.node())
				cur = nil
			}
			stack = stack[:len(stack)-1]
		default:
			key, value, ok := strings.Cut(line, ":")
			if !ok {
				return nil, fmt.Errorf("corosync.conf line %d: expected key: value, got %q", lineNo, line)
			}
			if cur != nil {
				cur.set(strings.TrimSpace(key), strings.TrimSpace(value))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read corosync.conf: %w", err)
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("corosync.conf: section %q not closed", stack[len(stack)-1])
	}
	return nodes, nil
}
