// Package reach lists every string a value holds, for tests that must
// prove a secret is nowhere in a parsed structure: fmt's %#v prints a
// pointer's address, not what it points to, and skips nothing it cannot
// see, so tests walk the value instead.
package reach

import "reflect"

// Strings returns every string reachable from v: string fields (exported
// or not), map keys and values, slice and array elements, through
// pointers and interfaces, each pointer followed once. Byte slices are
// returned as strings too.
func Strings(v any) []string {
	w := walker{seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(v))
	return w.out
}

type walker struct {
	seen map[uintptr]bool
	out  []string
}

func (w *walker) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		w.out = append(w.out, v.String())
	case reflect.Pointer:
		if v.IsNil() || w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		w.walk(v.Elem())
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			w.walk(v.Field(i))
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			w.out = append(w.out, string(v.Bytes()))
			return
		}
		for i := range v.Len() {
			w.walk(v.Index(i))
		}
	case reflect.Array:
		for i := range v.Len() {
			w.walk(v.Index(i))
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			w.walk(iter.Key())
			w.walk(iter.Value())
		}
	}
}
