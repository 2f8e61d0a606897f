package message

import (
	"math"
	"strings"
	"unicode/utf16"
)

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

// MultiTagsCode is the consume-queue tag code of a message whose TAGS value
// holds several "||"-separated tags. It is outside the int32 range, so it
// never equals a String.hashCode, and TAG matchers accept it in their
// pre-filter (the exact check then decides).
const MultiTagsCode int64 = math.MaxInt32 + 1

// TagsCode is the tag code a consume-queue entry carries for a message whose
// TAGS property is tags: Java's String.hashCode (0 when empty), as a Java
// broker stores it, or MultiTagsCode for a multi-tag value. Stores use it
// when they rebuild consume queues from their log, so it must stay a pure
// function of the record.
func TagsCode(tags string) int64 {
	if strings.Contains(tags, "||") {
		return MultiTagsCode
	}
	return TagsHashCode(tags)
}
