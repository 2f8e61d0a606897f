package message

import "unicode/utf16"

// TagsHashCode is Java's String.hashCode of the tag, over UTF-16 code units,
// widened to int64 as stored in a consume queue entry. Empty tags hash to 0.
func TagsHashCode(tags string) int64 {
	var h int32
	for _, r := range tags {
		if r < 0x10000 {
			h = 31*h + int32(r)
			continue
		}
		r1, r2 := utf16.EncodeRune(r)
		h = 31*h + int32(r1)
		h = 31*h + int32(r2)
	}
	return int64(h)
}
