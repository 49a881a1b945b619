package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MaxAliasExpansion bounds what YAML aliases may add to a configuration:
// each use of an alias (*name) counts what it stands for, as one per
// value plus the length of each scalar, aliases within it counted again.
//
// Aliases are kept because they have honest uses, such as one TLS
// section for client and peer (peer: *tls), which add a few hundred
// bytes. Unbounded, they amplify: yaml.Unmarshal into a yaml.Node keeps an
// alias as a pointer, but checkNode, Decode and every rule after them see
// its value once per use, and every problem echoed it: one 512 KiB value
// aliased 35,000 times in a 1 MiB file made `validate` print gigabytes.
//
// yaml.v3's decoder has its own guard (allowedAliasRatio in decode.go):
// it counts decoded nodes, and fails when, past 1,000 of them, more than
// 99% come from aliases (down to 10% for documents of 4 million nodes).
// That suits documents of any size but not this file: it counts a value
// of 512 KiB as one node, so the flat amplification above passes it, and
// it allows nearly 400,000 nodes from aliases, in Decode only, after
// checkNode has walked them. A configuration file is at most
// MaxConfigBytes, so a fixed budget is also one relative to the file: a
// sixteenth of the largest, hundreds of times what honest aliases use.
const MaxAliasExpansion = 64 << 10

// MaxMappingEntries bounds the entries of one mapping: yaml.v3's Decode
// compares every pair of keys of a mapping it decodes, so that the 75,000
// etcd.extraArgs entries a 1 MiB file holds cost 2.8 billion comparisons,
// seconds of CPU at every load. etcd has about 150 flags; the largest
// struct here, a few dozen fields.
const MaxMappingEntries = 1000

// readDocument parses the configuration's one YAML document into a node
// tree, without expanding aliases. It refuses a second document, which
// yaml.Unmarshal would silently ignore along with the settings in it.
// The tree is nil for a file without a document (empty, or only
// comments).
func readDocument(data []byte) (*yaml.Node, Errors) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, Errors{{Path: "(file)", Rule: fmt.Sprintf("not valid YAML: %v", err)}}
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, Errors{{Path: "(file)", Rule: fmt.Sprintf("not valid YAML: %v", err)}}
	default:
		return nil, Errors{{Path: "(file)", Rule: fmt.Sprintf("line %d: a second YAML document: etcdlet reads one; remove it", next.Line)}}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

// guard walks the document once, as the file has it (each alias a
// pointer, not followed), before anything expands it, and refuses what
// would make checkNode and Decode see something other than the file
// shows, or more than the file holds:
//   - aliases that would add more than MaxAliasExpansion, or that refer
//     to a value containing them (a cycle);
//   - explicit tags (!!binary, !!str, !!timestamp, !custom): !!binary
//     decodes base64, so the file would not show the path or name etcdlet
//     uses, and no field needs a tag (quoting makes a string);
//   - merge keys (<<: *anchor): Decode merges their fields in, but the
//     strict checks would not see them (neither as unknown nor as set), and
//     they expand aliases too; an alias of a whole section does the same
//     job, seen;
//   - aliases as keys: the checks read the anchor's name as the key,
//     Decode the anchored value;
//   - mappings of more than MaxMappingEntries entries.
//
// It costs one visit per node of the file, whatever the aliases.
func guard(root *yaml.Node) Errors {
	g := &guardWalk{size: map[*yaml.Node]int{}}
	g.walk(root)
	return g.errs
}

type guardWalk struct {
	errs Errors
	// size is the expanded size of each anchored node walked so far; -1
	// while it is being walked, so that an alias to it is a cycle.
	size map[*yaml.Node]int
	// added is what the aliases walked so far add.
	added int
	// over is set once added passes MaxAliasExpansion: the walk stops.
	over bool
	// path is the field path of the node being walked, one element per
	// level: ".key" or "[i]".
	path []string
}

// walk returns the size of node with its aliases expanded: one, plus the
// length of a scalar's value, plus its children's. Sizes stay within
// MaxConfigBytes+MaxAliasExpansion: the walk stops once aliases add more.
func (g *guardWalk) walk(node *yaml.Node) int {
	if g.over {
		return 0
	}
	if node.Kind == yaml.AliasNode {
		return g.alias(node)
	}
	if node.Style&yaml.TaggedStyle != 0 {
		var value any
		if node.Kind == yaml.ScalarNode {
			value = node.Value
		}
		g.errs.add(g.where(), value, "the explicit tag %s is not accepted: a tag changes how a value is read (!!binary decodes base64) and no field needs one; write the value itself, quoted for a string (line %d)", node.Tag, node.Line)
	}
	if node.Anchor != "" {
		g.size[node] = -1
	}
	size := 1 + len(node.Value)
	switch node.Kind {
	case yaml.MappingNode:
		if n := len(node.Content) / 2; n > MaxMappingEntries {
			g.errs.add(g.where(), fmt.Sprintf("%d entries", n), "must have at most %d entries: the YAML decoder compares every pair of keys (line %d)", MaxMappingEntries, node.Line)
		}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key, value := node.Content[i], node.Content[i+1]
			g.path = append(g.path, "."+key.Value)
			switch {
			case key.Kind == yaml.AliasNode:
				g.errs.add(g.where(), nil, "an alias (*%s) as a key is not accepted: write the key out (line %d)", key.Value, key.Line)
			case key.Kind == yaml.ScalarNode && key.Tag == "!!merge": // a plain <<, not "<<"
				g.errs.add(g.where(), nil, "merge keys are not accepted: the checks cannot see the fields they merge in; write the fields out, or alias the whole section (line %d)", key.Line)
			}
			size += g.walk(key) + g.walk(value)
			g.path = g.path[:len(g.path)-1]
		}
	case yaml.SequenceNode:
		for i, item := range node.Content {
			g.path = append(g.path, "["+strconv.Itoa(i)+"]")
			size += g.walk(item)
			g.path = g.path[:len(g.path)-1]
		}
	}
	if node.Anchor != "" {
		g.size[node] = size
	}
	return size
}

func (g *guardWalk) alias(node *yaml.Node) int {
	size, walked := g.size[node.Alias]
	switch {
	case !walked || size < 0:
		// An alias refers to an anchor before it in the file, which the
		// walk, in file order, has finished, unless the alias is inside
		// the anchored value.
		g.errs.add(g.where(), nil, "the alias *%s refers to a value that contains it (line %d)", node.Value, node.Line)
		return 0
	case g.added+size > MaxAliasExpansion:
		g.errs.add(g.where(), nil, "YAML aliases may add at most %d KiB to the file, and with the aliases before it the alias *%s (about %d bytes) would add more: write the values out (line %d)",
			MaxAliasExpansion>>10, node.Value, size, node.Line)
		g.over = true
		return 0
	}
	g.added += size
	return size
}

// where is the field path of the node being walked.
func (g *guardWalk) where() string {
	return display(strings.TrimPrefix(strings.Join(g.path, ""), "."))
}
