package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/etcdlet/etcdlet/config/trust"
)

// MaxConfigBytes bounds what is read of a configuration file: a real one
// is a few KiB.
const MaxConfigBytes = 1 << 20

// Load reads, strictly decodes, defaults and validates a configuration
// file. On failure the error is an Errors list with every problem found.
// The file must be one only root can change (see package trust): it picks
// the programs etcdlet runs and the image of the etcd pod.
func Load(path string) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	data, err := ReadRegularFile(abs, MaxConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("read config %s: %w", path, err)
	}
	if err := trust.Check(abs); err != nil {
		return nil, fmt.Errorf("config file %w", err)
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, err
	}
	cfg.Digest = digest(data)
	if err := cfg.Validate(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// FileDigest is the digest of a configuration file's content as Load
// would read it, to compare with a loaded configuration's Digest.
func FileDigest(path string) (string, error) {
	data, err := ReadRegularFile(path, MaxConfigBytes)
	if err != nil {
		return "", fmt.Errorf("read config %s: %w", path, err)
	}
	return digest(data), nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Parse strictly decodes YAML into a Config and applies defaults, without
// validating values. Unknown fields, duplicate keys and values of the wrong
// type are errors naming the field path and line, and so are what would
// make the checks see other than the file shows or more than it holds
// (see guard): a second document, explicit tags, merge keys, aliases that
// add more than MaxAliasExpansion.
func Parse(data []byte) (*Config, error) {
	cfg := &Config{}
	root, errs := readDocument(data)
	if len(errs) > 0 {
		return nil, errs
	}
	explicit := map[string]bool{}
	if root != nil {
		// Before checkNode and Decode, which expand aliases.
		if errs := guard(root); len(errs) > 0 {
			return nil, errs
		}
		checkNode(&errs, explicit, "", root, reflect.TypeOf(cfg).Elem())
		if len(errs) > 0 {
			return nil, errs
		}
		if err := root.Decode(cfg); err != nil {
			return nil, Errors{{Path: "(file)", Rule: err.Error()}}
		}
	}
	cfg.applyDefaults(explicit)
	return cfg, nil
}

var durationType = reflect.TypeOf(time.Duration(0))

// checkNode walks a YAML node against the Go type it will be decoded into
// and reports unknown fields, duplicate keys and scalars that do not fit,
// each with its field path. yaml.v3's own strict mode reports these too,
// but only with Go type names and without the path a user needs. The path
// of every scalar the file sets (not null) goes into explicit, so that
// defaults fill only what the file leaves out.
func checkNode(errs *Errors, explicit map[string]bool, path string, node *yaml.Node, t reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if node.Kind == yaml.AliasNode {
		node = node.Alias
	}
	if node.Kind == yaml.ScalarNode && node.Tag == "!!null" {
		return
	}
	switch {
	case t.Kind() == reflect.Struct:
		checkStruct(errs, explicit, path, node, t)
	case t.Kind() == reflect.Map:
		if node.Kind != yaml.MappingNode {
			errs.add(display(path), node.Value, "must be a mapping (line %d)", node.Line)
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			key := node.Content[i]
			if first, dup := seen[key.Value]; dup {
				errs.add(join(path, key.Value), nil, "defined twice (lines %d and %d)", first, key.Line)
			}
			seen[key.Value] = key.Line
			checkNode(errs, explicit, join(path, key.Value), node.Content[i+1], t.Elem())
		}
	case t.Kind() == reflect.Slice:
		if node.Kind != yaml.SequenceNode {
			errs.add(display(path), node.Value, "must be a list (line %d)", node.Line)
			return
		}
		for i, item := range node.Content {
			checkNode(errs, explicit, fmt.Sprintf("%s[%d]", path, i), item, t.Elem())
		}
	default:
		explicit[path] = true
		checkScalar(errs, path, node, t)
	}
}

func checkStruct(errs *Errors, explicit map[string]bool, path string, node *yaml.Node, t reflect.Type) {
	if node.Kind != yaml.MappingNode {
		errs.add(display(path), node.Value, "must be a mapping (line %d)", node.Line)
		return
	}
	fields := yamlFields(t)
	seen := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := node.Content[i], node.Content[i+1]
		fieldPath := join(path, key.Value)
		if first, dup := seen[key.Value]; dup {
			errs.add(fieldPath, nil, "defined twice (lines %d and %d)", first, key.Line)
			continue
		}
		seen[key.Value] = key.Line
		ft, known := fields[key.Value]
		if !known {
			errs.add(fieldPath, nil, "unknown field (line %d); known fields here: %s", key.Line, strings.Join(slices.Sorted(maps.Keys(fields)), ", "))
			continue
		}
		checkNode(errs, explicit, fieldPath, value, ft)
	}
}

func checkScalar(errs *Errors, path string, node *yaml.Node, t reflect.Type) {
	if node.Kind != yaml.ScalarNode {
		errs.add(display(path), nil, "must be a single value, not a list or mapping (line %d)", node.Line)
		return
	}
	if t == durationType {
		if _, err := time.ParseDuration(node.Value); err != nil {
			errs.add(path, node.Value, "must be a duration such as 500ms, 5s or 1m (line %d)", node.Line)
		}
		return
	}
	// yaml.v3 decodes 2379.0 into an int and yes, no, on and off into a
	// bool; YAML 1.2 reads them as a float and as strings, and so do we.
	if tag := scalarTag(t); tag != "" && node.ShortTag() != tag {
		plain := yaml.Node{Kind: yaml.ScalarNode, Value: node.Value}
		switch {
		case node.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 && plain.ShortTag() == tag:
			errs.add(path, node.Value, "must be an unquoted %s, not a quoted string (line %d)", kindName(t), node.Line)
		case tag == "!!bool" && slices.Contains(yaml11Bools, strings.ToLower(node.Value)):
			errs.add(path, node.Value, "must be true or false; yes, no, on and off are strings in YAML 1.2 (line %d)", node.Line)
		default:
			errs.add(path, node.Value, "must be %s (line %d)", articled(kindName(t)), node.Line)
		}
		return
	}
	if err := node.Decode(reflect.New(t).Interface()); err != nil {
		errs.add(path, node.Value, "must be %s (line %d)", articled(kindName(t)), node.Line)
	}
}

// yaml11Bools are the YAML 1.1 booleans that YAML 1.2 reads as strings.
var yaml11Bools = []string{"y", "yes", "n", "no", "on", "off"}

// scalarTag is the YAML tag a value of type t must resolve to, or "" when
// the decoder's own check is enough.
func scalarTag(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "!!int"
	case reflect.Bool:
		return "!!bool"
	}
	return ""
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "string"
	default:
		return t.Kind().String()
	}
}

// articled puts "a" before a kind name that is a noun.
func articled(kind string) string {
	if kind == "true or false" {
		return kind
	}
	return "a " + kind
}

// yamlFields maps the YAML keys of a struct to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		if name, ok := yamlName(t.Field(i)); ok {
			fields[name] = t.Field(i).Type
		}
	}
	return fields
}

// yamlName is the key a struct field has in the file, and false for a
// field the file cannot set.
func yamlName(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func display(path string) string {
	if path == "" {
		return "(file)"
	}
	return path
}
