package message

import (
	"slices"
	"strings"
)

// Separators of the RocketMQ properties string.
const (
	NameValueSeparator = '\x01'
	PropertySeparator  = '\x02'
)

// Properties are a message's string properties, system and user alike.
type Properties map[string]string

// ParseProperties decodes a properties string. It accepts both the Java form
// (no trailing separator) and the Go client's form (trailing 0x02), and skips
// pairs with an empty key or value, as Java does.
func ParseProperties(s string) Properties {
	p := make(Properties, 8)
	parsePropertiesInto(p, s)
	return p
}

func parsePropertiesInto(p Properties, s string) {
	for len(s) > 0 {
		i := strings.IndexByte(s, PropertySeparator)
		var item string
		if i < 0 {
			item, s = s, ""
		} else {
			item, s = s[:i], s[i+1:]
		}
		j := strings.IndexByte(item, NameValueSeparator)
		if j <= 0 || j == len(item)-1 {
			continue
		}
		p[item[:j]] = item[j+1:]
	}
}

// Encode returns the properties string in the Java form, keys sorted so the
// output is deterministic.
func (p Properties) Encode() string {
	if len(p) == 0 {
		return ""
	}
	return string(p.AppendEncoded(nil))
}

// AppendEncoded appends the encoded properties to b.
func (p Properties) AppendEncoded(b []byte) []byte {
	if len(p) == 0 {
		return b
	}
	var buf [16]string // a message's properties fit: no allocation
	keys := buf[:0]
	for k, v := range p {
		if k == "" || v == "" {
			continue
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			b = append(b, PropertySeparator)
		}
		b = append(b, k...)
		b = append(b, NameValueSeparator)
		b = append(b, p[k]...)
	}
	return b
}

// Clone returns a copy of p.
func (p Properties) Clone() Properties {
	c := make(Properties, len(p)+2)
	for k, v := range p {
		c[k] = v
	}
	return c
}

// KeyList splits the KEYS property on spaces.
func (p Properties) KeyList() []string {
	return strings.Fields(p[PropertyKeys])
}
