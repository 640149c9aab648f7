package gateway

import (
	"reflect"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/config"
)

// configDiff names the settings that differ between two loaded configs, by their key paths in the
// file: a struct is compared field by field (listen.http, limits.dedup.window), a map by its keys,
// down to the key and no deeper (mcpServers.orders, rate_limits.roles.viewer), anything else as one
// value (auth.api_keys). Fields the file does not hold (yaml:"-", such as Config.File) are left out.
// It names settings, never values: values may be secrets (state.redis.url, an upstream's headers).
func configDiff(a, b *config.Config) []string {
	var out []string
	diffValue("", reflect.ValueOf(*a), reflect.ValueOf(*b), &out)
	slices.Sort(out)
	return out
}

func diffValue(path string, a, b reflect.Value, out *[]string) {
	if reflect.DeepEqual(a.Interface(), b.Interface()) {
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		if diffStruct(path, a, b, out) {
			return
		}
	case reflect.Pointer:
		if !a.IsNil() && !b.IsNil() {
			diffValue(path, a.Elem(), b.Elem(), out)
			return
		}
	case reflect.Map:
		if a.Type().Key().Kind() == reflect.String {
			keys := map[string]bool{}
			for _, m := range []reflect.Value{a, b} {
				for _, k := range m.MapKeys() {
					keys[k.String()] = true
				}
			}
			for k := range keys {
				va, vb := a.MapIndex(reflect.ValueOf(k).Convert(a.Type().Key())), b.MapIndex(reflect.ValueOf(k).Convert(b.Type().Key()))
				if !va.IsValid() || !vb.IsValid() || !reflect.DeepEqual(va.Interface(), vb.Interface()) {
					*out = append(*out, join(path, k))
				}
			}
			return
		}
	}
	*out = append(*out, path)
}

// diffStruct compares the fields the file holds; false when the struct has none (a value type).
func diffStruct(path string, a, b reflect.Value, out *[]string) bool {
	held := false
	for i := range a.NumField() {
		f := a.Type().Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "" {
			continue
		}
		held = true
		if name == "-" {
			continue
		}
		diffValue(join(path, name), a.Field(i), b.Field(i), out)
	}
	return held
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
