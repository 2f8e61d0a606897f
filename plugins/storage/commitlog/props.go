package commitlog

import (
	"github.com/quivermq/quiver/core/message"
)

// maxSortedProps is how many properties appendProps sorts on the stack.
const maxSortedProps = 16

// appendProps appends p encoded as message.Properties.AppendEncoded does
// (name, value pairs sorted by name, empty names and values left out) but
// without allocating for up to maxSortedProps properties. The record
// checksum property is left out: the store appends its own (checksum.go).
func appendProps(b []byte, p message.Properties) []byte {
	if len(p) == 0 {
		return b
	}
	if len(p) > maxSortedProps {
		return dropCRCProp(p).AppendEncoded(b)
	}
	var arr [maxSortedProps]string
	keys := arr[:0]
	for k, v := range p {
		if k == "" || v == "" || k == crcPropName {
			continue
		}
		// Insertion sort: a handful of keys.
		i := len(keys)
		keys = append(keys, k)
		for i > 0 && keys[i-1] > k {
			keys[i] = keys[i-1]
			i--
		}
		keys[i] = k
	}
	for i, k := range keys {
		if i > 0 {
			b = append(b, message.PropertySeparator)
		}
		b = append(b, k...)
		b = append(b, message.NameValueSeparator)
		b = append(b, p[k]...)
	}
	return b
}
