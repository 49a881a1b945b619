// Package etcdflags knows etcd's server flags: which exist in the etcd
// version etcdlet is built with (etcd's config-file keys are its flag
// names, carried as json tags of embed.Config) and what type of value each
// takes. The embedded runtime sets them on its server configuration; the
// static-pod runtime passes them on the command line.
package etcdflags

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/pkg/v3/featuregate"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/etcdlet/etcdlet/config"
)

// fields maps etcd flag names to embed.Config fields. etcd's
// config file keys are its flag names, and embed.Config carries them as
// json tags, so the flags an embedded server understands are exactly the
// tagged fields of a type etcdlet can set from a string.
var fields = func() map[string]int {
	fields := map[string]int{}
	t := reflect.TypeOf(embed.Config{})
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !settable(f.Type) {
			continue
		}
		fields[name] = i
	}
	return fields
}()

var durationType = reflect.TypeOf(time.Duration(0))

func settable(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.String, reflect.Bool, reflect.Int, reflect.Int64, reflect.Int32,
		reflect.Uint, reflect.Uint64, reflect.Uint32, reflect.Float64:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String
	}
	return false
}

// Apply sets etcd.extraArgs on an embed configuration. Names config
// validation rejects are errors here too, never applied.
func Apply(cfg *embed.Config, args map[string]string) error {
	errs := Validate(args, true)
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if rule := config.ExtraArgRule(name); rule != "" {
			errs = append(errs, config.FieldError{Path: "etcd.extraArgs." + name, Value: args[name], Rule: rule})
		}
	}
	if len(errs) > 0 {
		return errs
	}
	v := reflect.ValueOf(cfg).Elem()
	for _, name := range slices.Sorted(maps.Keys(args)) {
		if name == featureGatesFlag {
			// etcd reads "feature-gates" only from a config file or its
			// command line; the server itself asks ServerFeatureGate.
			if err := setFeatureGates(cfg, args[name]); err != nil {
				return fmt.Errorf("etcd.extraArgs.%s: %w", name, err)
			}
			continue
		}
		if err := set(v.Field(fields[name]), args[name]); err != nil {
			return fmt.Errorf("etcd.extraArgs.%s: %w", name, err)
		}
	}
	return nil
}

// featureGatesFlag is etcd's --feature-gates: Name=bool pairs, comma
// separated, e.g. InitialCorruptCheck=true.
const featureGatesFlag = "feature-gates"

func setFeatureGates(cfg *embed.Config, value string) error {
	gate, ok := cfg.ServerFeatureGate.(featuregate.MutableFeatureGate)
	if !ok {
		return fmt.Errorf("the embedded etcd's feature gates cannot be changed")
	}
	return gate.Set(value)
}

// Validate checks etcd.extraArgs: the value of every flag etcd knows must
// have the right type. With strict, a flag this etcd version does not know
// is an error too: the embedded server is exactly this version. A static
// pod may run another etcd version, whose new flags etcdlet cannot know.
// Names that config validation rejects (config.ExtraArgRule: flags etcdlet
// owns or denies, malformed names) are skipped, so that no name is
// reported twice.
func Validate(args map[string]string, strict bool) config.Errors {
	var errs config.Errors
	probe := reflect.ValueOf(embed.NewConfig()).Elem()
	for _, name := range slices.Sorted(maps.Keys(args)) {
		path := "etcd.extraArgs." + name
		if config.ExtraArgRule(name) != "" {
			continue
		}
		if name == featureGatesFlag {
			// Not a field of embed.Config (etcd keeps it in the config
			// file's own struct). Unknown gates and values that are not
			// Name=bool fail here, not when the member starts; a static
			// pod's etcd may know other gates.
			if err := setFeatureGates(embed.NewConfig(), args[name]); err != nil && strict {
				errs = append(errs, config.FieldError{Path: path, Value: args[name], Rule: err.Error()})
			}
			continue
		}
		i, ok := fields[name]
		if !ok {
			if strict {
				errs = append(errs, config.FieldError{Path: path, Value: args[name], Rule: "not a flag the embedded etcd server understands"})
			}
			continue
		}
		if err := set(probe.Field(i), args[name]); err != nil {
			errs = append(errs, config.FieldError{Path: path, Value: args[name], Rule: err.Error()})
		}
	}
	return errs
}

func set(field reflect.Value, raw string) error {
	switch {
	case field.Type() == durationType:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("must be a duration such as 5s")
		}
		field.SetInt(int64(d))
	case field.Kind() == reflect.String:
		field.SetString(raw)
	case field.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("must be true or false")
		}
		field.SetBool(b)
	case field.CanInt():
		n, err := strconv.ParseInt(raw, 10, field.Type().Bits())
		if err != nil {
			return fmt.Errorf("must be a whole number")
		}
		field.SetInt(n)
	case field.CanUint():
		n, err := strconv.ParseUint(raw, 10, field.Type().Bits())
		if err != nil {
			return fmt.Errorf("must be a non-negative whole number")
		}
		field.SetUint(n)
	case field.CanFloat():
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("must be a number")
		}
		field.SetFloat(f)
	case field.Kind() == reflect.Slice:
		field.Set(reflect.ValueOf(strings.Split(raw, ",")))
	default:
		return fmt.Errorf("cannot be set from a string")
	}
	return nil
}
