// Package cib reads the few facts etcdlet needs from pacemaker's CIB
// configuration that crm_mon does not print: the instance attributes of
// primitives (a fencing device's pcmk_host_list / pcmk_host_map, the etcd
// agent's node_ip_map) and permanent node attributes.
//
// Input is the output of `cibadmin --query` (root <cib>), of
// `cibadmin --query --scope configuration` (root <configuration>), or a
// CIB file. The status section, which pacemaker documents as internal, is
// never interpreted.
//
// Only the attributes etcdlet uses are kept (PrimitiveParams,
// NodeAttributeNames, MetaAttributeNames); every other one is dropped
// while parsing. A fencing device's instance attributes carry its
// credentials (passwd, password, passwd_script, username, ...): none of
// them is ever in a Config, so nothing that holds, logs or serializes one
// can leak them.
package cib

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The attributes Parse keeps; it drops every other one. Add a name here
// before reading it elsewhere, and only if it is never a secret.
var (
	// PrimitiveParams are the instance attributes kept of every primitive:
	// a fencing device's targets and the etcd agent's address map.
	PrimitiveParams = []string{"pcmk_host_list", "pcmk_host_map", "node_ip_map"}
	// NodeAttributeNames are the permanent node attributes kept.
	NodeAttributeNames = []string{"node_ip", "standby"}
	// MetaAttributeNames are the resource meta attributes kept.
	MetaAttributeNames = []string{"maintenance"}
)

// Config is the part of the CIB configuration etcdlet reads.
type Config struct {
	// Primitives by id, including those nested in clones, groups and bundles.
	Primitives map[string]Primitive
	// NodeAttributes holds permanent node attributes by node name (uname),
	// only those in NodeAttributeNames; a node with none is absent.
	NodeAttributes map[string]map[string]string
	// FencingLevels is the fencing topology, in document order.
	FencingLevels []FencingLevel
	// Meta holds the meta attributes in MetaAttributeNames of every
	// resource (primitives and their clone, group and bundle containers)
	// by id; a resource with none is absent. crm_mon before 2.1.6 does not
	// print a resource's maintenance meta attribute.
	Meta map[string]map[string]string
}

// FencingLevel is a <fencing-level>: the devices to use for a target.
// Levels that select targets by node attribute are kept with empty Target
// and TargetPattern; etcdlet cannot resolve them and ignores them.
type FencingLevel struct {
	// Index orders a target's levels: pacemaker tries them from the
	// lowest index up.
	Index         int
	Target        string
	TargetPattern string
	// Pattern is TargetPattern compiled; nil when it is not a valid
	// regular expression (such a level matches no node).
	Pattern *regexp.Regexp
	Devices []string
}

// Primitive is a <primitive> with its instance attributes.
type Primitive struct {
	ID       string
	Class    string
	Provider string
	Type     string
	// Params holds the instance attributes in PrimitiveParams (never
	// nil). Where several sets define a name, the first set without rules
	// wins, because rule-based sets apply only conditionally and etcdlet
	// does not evaluate rules.
	Params map[string]string
}

type rawConfiguration struct {
	Nodes []struct {
		ID    string     `xml:"id,attr"`
		Uname string     `xml:"uname,attr"`
		Sets  []rawNVSet `xml:"instance_attributes"`
	} `xml:"nodes>node"`
	Resources rawResources `xml:"resources"`
	Levels    []struct {
		Index         string `xml:"index,attr"`
		Target        string `xml:"target,attr"`
		TargetPattern string `xml:"target-pattern,attr"`
		Devices       string `xml:"devices,attr"`
	} `xml:"fencing-topology>fencing-level"`
}

type rawNVSet struct {
	Rules  []struct{} `xml:"rule"`
	Params []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"nvpair"`
}

type rawPrimitive struct {
	ID       string     `xml:"id,attr"`
	Class    string     `xml:"class,attr"`
	Provider string     `xml:"provider,attr"`
	Type     string     `xml:"type,attr"`
	Sets     []rawNVSet `xml:"instance_attributes"`
	Meta     []rawNVSet `xml:"meta_attributes"`
}

// rawResources collects primitives at any depth of clone/group/bundle,
// and the meta attributes of the containers on the way.
type rawResources struct {
	primitives []rawPrimitive
	meta       map[string][]rawNVSet
}

const maxNesting = 16

func (r *rawResources) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	r.meta = map[string][]rawNVSet{}
	var open []string // ids of the containers we are inside
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "primitive":
				var p rawPrimitive
				if err := d.DecodeElement(&p, &t); err != nil {
					return err
				}
				r.primitives = append(r.primitives, p)
			case "clone", "master", "group", "bundle":
				if len(open) >= maxNesting {
					return fmt.Errorf("resources nested deeper than %d levels", maxNesting)
				}
				open = append(open, attr(t.Attr, "id"))
			case "meta_attributes":
				var set rawNVSet
				if err := d.DecodeElement(&set, &t); err != nil {
					return err
				}
				if len(open) > 0 {
					id := open[len(open)-1]
					r.meta[id] = append(r.meta[id], set)
				}
			default:
				if err := d.Skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			if len(open) == 0 {
				return nil
			}
			open = open[:len(open)-1]
		}
	}
}

// Parse reads a CIB document or its configuration section.
func Parse(data []byte) (*Config, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("no <configuration> element in CIB")
		}
		if err != nil {
			return nil, fmt.Errorf("decode CIB: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch se.Name.Local {
		case "cib":
			continue // descend into the document element
		case "configuration":
			var raw rawConfiguration
			if err := d.DecodeElement(&raw, &se); err != nil {
				return nil, fmt.Errorf("decode CIB configuration: %w", err)
			}
			return convert(&raw), nil
		default:
			if err := d.Skip(); err != nil {
				return nil, fmt.Errorf("decode CIB: %w", err)
			}
		}
	}
}

func convert(raw *rawConfiguration) *Config {
	c := &Config{
		Primitives:     make(map[string]Primitive, len(raw.Resources.primitives)),
		NodeAttributes: make(map[string]map[string]string, len(raw.Nodes)),
		Meta:           make(map[string]map[string]string, len(raw.Resources.meta)),
	}
	for id, sets := range raw.Resources.meta {
		if m := params(sets, MetaAttributeNames); len(m) > 0 {
			c.Meta[id] = m
		}
	}
	for _, p := range raw.Resources.primitives {
		if m := params(p.Meta, MetaAttributeNames); len(m) > 0 {
			c.Meta[p.ID] = m
		}
		c.Primitives[p.ID] = Primitive{
			ID:       p.ID,
			Class:    strings.ToLower(p.Class),
			Provider: p.Provider,
			Type:     p.Type,
			Params:   params(p.Sets, PrimitiveParams),
		}
	}
	for _, n := range raw.Nodes {
		name := n.Uname
		if name == "" {
			name = n.ID
		}
		if attrs := params(n.Sets, NodeAttributeNames); len(attrs) > 0 {
			c.NodeAttributes[name] = attrs
		}
	}
	for _, l := range raw.Levels {
		index, _ := strconv.Atoi(strings.TrimSpace(l.Index)) // required by the schema; 0 sorts a broken one first
		var pattern *regexp.Regexp
		if l.TargetPattern != "" {
			pattern, _ = regexp.Compile(l.TargetPattern)
		}
		c.FencingLevels = append(c.FencingLevels, FencingLevel{
			Index:         index,
			Target:        l.Target,
			TargetPattern: l.TargetPattern,
			Pattern:       pattern,
			Devices:       strings.FieldsFunc(l.Devices, func(r rune) bool { return r == ',' }),
		})
	}
	return c
}

func attr(attrs []xml.Attr, name string) string {
	for _, a := range attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// params merges name-value sets into one map of the names in keep; every
// other name, and its value, is left behind.
func params(sets []rawNVSet, keep []string) map[string]string {
	out := map[string]string{}
	// Unconditional sets first, then rule-based ones as a fallback.
	for _, conditional := range []bool{false, true} {
		for _, s := range sets {
			if (len(s.Rules) > 0) != conditional {
				continue
			}
			for _, p := range s.Params {
				if _, seen := out[p.Name]; !seen && slices.Contains(keep, p.Name) {
					out[p.Name] = p.Value
				}
			}
		}
	}
	return out
}
