package config

import "reflect"

// ChangedFields names, by their paths in the file (etcd.clientPort), the
// settings that differ between two configurations. Lists and maps are
// compared whole and named by their own path.
func ChangedFields(old, next *Config) []string {
	return changedFields("", reflect.ValueOf(*old), reflect.ValueOf(*next))
}

func changedFields(path string, a, b reflect.Value) []string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				return []string{path}
			}
			return nil
		}
		return changedFields(path, a.Elem(), b.Elem())
	case reflect.Struct:
		var out []string
		for i := range a.NumField() {
			if name, ok := yamlName(a.Type().Field(i)); ok {
				out = append(out, changedFields(join(path, name), a.Field(i), b.Field(i))...)
			}
		}
		return out
	default:
		if !reflect.DeepEqual(a.Interface(), b.Interface()) {
			return []string{path}
		}
		return nil
	}
}
