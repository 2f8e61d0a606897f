package message

// MaxPriority bounds the priority a message may carry. Levels past a
// topic's highest queue share that queue (protocol.PriorityQueue), so the
// bound only keeps the value an int32 the 5.x protocol can carry.
const MaxPriority = 1<<31 - 1

// ParsePriority reads a PropertyPriority value: a decimal integer in
// [0, MaxPriority], no sign, no spaces. ok is false for anything else,
// which the broker treats as no priority (RocketMQ's broker drops such a
// value too).
func ParsePriority(v string) (p int32, ok bool) {
	if v == "" || len(v) > 10 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > MaxPriority {
		return 0, false
	}
	return int32(n), true
}

// Priority is the message's priority, from PropertyPriority; ok is false
// when it has none or the value does not parse.
func (p Properties) Priority() (int32, bool) {
	v, found := p[PropertyPriority]
	if !found {
		return 0, false
	}
	return ParsePriority(v)
}
