package pool

import (
	"fmt"
	"slices"
	"strings"
)

// Attributes. An exit may carry free-form key=value attributes — the facts a request may need of
// it (country=us, city=nyc, asn=7922, kind=residential) — beside its label, tier and weight. A
// request asks for them with a Want (want.go); the pool indexes its exits by attribute per exit
// set, so a constrained pick costs what an unconstrained one does (wantview.go).
//
// This is the one attribute model of the pool: proxy lists write attributes as the fields they do
// not otherwise know (ReadExits), code as Exit.WithAttr, and the features that read an exit's
// facts (a gateway's session template filling {country}, costs per gigabyte) read them here.
//
// The alphabet, checked when an exit joins a pool (and by ReadExits per line):
//   - a key is 1 to 32 bytes of lower-case ASCII letters, digits, '-', '_' and '.', starting with
//     a letter; the names ReadExits gives a meaning of its own (label, tier, weight and the
//     breaker settings) are not attribute keys;
//   - a value is 1 to 64 bytes of ASCII letters, digits and "-_.:/+@": no space, '=' or ',' (a
//     Want lists alternatives with commas).
//
// Values compare without regard to ASCII case: a Want for country=US matches country=us.

// Attr is one attribute of an exit.
type Attr struct {
	Key, Value string
}

// String returns "key=value".
func (a Attr) String() string { return a.Key + "=" + a.Value }

// The bounds of the attribute alphabet.
const (
	maxAttrKey   = 32
	maxAttrValue = 64
)

// WithAttr returns a copy of e with attribute key set to value (replacing an earlier value for
// key); an empty value removes the attribute. Keys and values are validated when the exit joins a
// pool (New, Add, Sync): an error names the exit and the attribute. Attributes are part of what
// Sync compares: an exit whose attributes changed is Updated, keeping its breakers.
func (e *Exit) WithAttr(key, value string) *Exit {
	c := *e
	attrs := slices.Clone(e.attrs)
	i, found := slices.BinarySearchFunc(attrs, key, func(a Attr, k string) int { return strings.Compare(a.Key, k) })
	switch {
	case value == "" && found:
		attrs = slices.Delete(attrs, i, i+1)
	case value == "":
	case found:
		attrs[i].Value = value
	default:
		attrs = slices.Insert(attrs, i, Attr{key, value})
	}
	if len(attrs) == 0 {
		attrs = nil
	}
	c.attrs = attrs
	return &c
}

// Attr returns the value of the exit's attribute key, and whether it has one.
func (e *Exit) Attr(key string) (string, bool) {
	i, found := slices.BinarySearchFunc(e.attrs, key, func(a Attr, k string) int { return strings.Compare(a.Key, k) })
	if !found {
		return "", false
	}
	return e.attrs[i].Value, true
}

// Attrs returns a copy of the exit's attributes, sorted by key.
func (e *Exit) Attrs() []Attr { return slices.Clone(e.attrs) }

// sameAttrs reports whether two exits carry the same attributes.
func sameAttrs(a, b *Exit) bool { return slices.Equal(a.attrs, b.attrs) }

// checkAttrs validates an exit's attributes (see the alphabet above).
func checkAttrs(e *Exit) error {
	for _, a := range e.attrs {
		if err := checkAttr(a.Key, a.Value); err != nil {
			return fmt.Errorf("pool: exit %s: %w", e.label, err)
		}
	}
	return nil
}

// checkAttr validates one attribute.
func checkAttr(key, value string) error {
	if err := checkAttrKey(key); err != nil {
		return err
	}
	if err := checkCostAttr(key, value); err != nil {
		return err
	}
	if value == "" || len(value) > maxAttrValue {
		return fmt.Errorf("attribute %s: value of %d bytes, want 1 to %d", key, len(value), maxAttrValue)
	}
	for i := 0; i < len(value); i++ {
		if !attrValueByte(value[i]) {
			return fmt.Errorf("attribute %s: value %q: byte %d (%q) is not a letter, digit or one of %q", key, value, i+1, value[i], attrValuePunct)
		}
	}
	return nil
}

// checkAttrKey validates an attribute key.
func checkAttrKey(key string) error {
	if key == "" || len(key) > maxAttrKey {
		return fmt.Errorf("attribute key %q: %d bytes, want 1 to %d", key, len(key), maxAttrKey)
	}
	if !('a' <= key[0] && key[0] <= 'z') {
		return fmt.Errorf("attribute key %q: want a lower-case letter first", key)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return fmt.Errorf("attribute key %q: byte %d (%q) is not a lower-case letter, digit, '-', '_' or '.'", key, i+1, c)
		}
	}
	if listFieldName(key) {
		return fmt.Errorf("attribute key %q: a proxy-list field of its own (%s), not an attribute", key, listFieldNames)
	}
	return nil
}

// attrValuePunct is the punctuation an attribute value may hold beside letters and digits.
const attrValuePunct = "-_.:/+@"

func attrValueByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(attrValuePunct, c) >= 0
}

// listFieldNames lists the proxy-list fields that are no attributes, for errors.
const listFieldNames = "label, tier, weight, " + breakerAttrNames

// listFieldName reports whether key is a proxy-list field with a meaning of its own.
func listFieldName(key string) bool {
	switch strings.TrimPrefix(key, "exit-") {
	case "label", "tier", "weight", "failures", "window", "cooldown", "max-cooldown", "park":
		return true
	}
	return false
}

// nearListField returns the proxy-list field key is one typo away from (one byte added, dropped,
// changed or two swapped), or "": in a list, "wieght=2" is an error, not an attribute.
func nearListField(key string) string {
	for _, f := range []string{"label", "tier", "weight", "failures", "window", "cooldown", "max-cooldown", "park"} {
		for _, name := range []string{f, "exit-" + f} {
			if name != key && oneEdit(key, name) {
				return name
			}
		}
	}
	return ""
}

// oneEdit reports whether a and b differ by one insertion, deletion, substitution or swap of
// adjacent bytes.
func oneEdit(a, b string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(b)-len(a) > 1 {
		return false
	}
	i := 0
	for i < len(a) && a[i] == b[i] {
		i++
	}
	if len(a) == len(b) {
		if i == len(a) {
			return false
		}
		if a[i+1:] == b[i+1:] {
			return true // substitution
		}
		return i+1 < len(a) && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:] // swap
	}
	return a[i:] == b[i+1:] // insertion
}
