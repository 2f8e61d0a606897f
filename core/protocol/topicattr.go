package protocol

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// RocketMQ 5's topic attributes: UPDATE_AND_CREATE_TOPIC's header
// "attributes" carries modifications ("+key=value" adds or changes,
// "-key" deletes, comma-separated: Java's AttributeParser), which the
// broker applies to the topic's current attributes as Java's
// AttributeUtil.alterCurrentAttributes does, against the attributes Java's
// TopicAttributes knows. Errors read as Java's, for the same requests.

// Topic attribute keys (Java's TopicAttributes).
const (
	AttrQueueType     = "queue.type"
	AttrCleanupPolicy = "cleanup.policy"
	AttrMessageType   = "message.type"
	AttrReserveTime   = "reserve.time"
)

// Topic message types (Java's TopicMessageType): the values of
// message.type.
const (
	MessageTypeUnspecified = "UNSPECIFIED"
	MessageTypeNormal      = "NORMAL"
	MessageTypeFIFO        = "FIFO"
	MessageTypeDelay       = "DELAY"
	MessageTypeTransaction = "TRANSACTION"
	MessageTypeMixed       = "MIXED"
	// MessageTypePriority is RocketMQ 5.4's priority topic (RIP-80): a
	// message's priority picks its queue, and consumers are served from
	// the highest queue with messages first (see PriorityQueue).
	MessageTypePriority = "PRIORITY"
	// MessageTypeLite is RocketMQ 5.5's lite parent topic (RIP-83): each
	// message names a lite topic, one ordered stream of the parent
	// (modules/grpc/lite.go).
	MessageTypeLite = "LITE"
)

// topicAttr is one attribute Java's TopicAttributes.ALL knows.
type topicAttr struct {
	changeable bool
	verify     func(v string) error
}

func enumAttr(changeable bool, values ...string) topicAttr {
	return topicAttr{changeable: changeable, verify: func(v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("value is not in set: [%s]", strings.Join(values, ", "))
		}
		return nil
	}}
}

var topicAttrs = map[string]topicAttr{
	AttrQueueType:     enumAttr(false, "BatchCQ", "SimpleCQ"),
	AttrCleanupPolicy: enumAttr(false, "DELETE", "COMPACTION"),
	AttrMessageType: enumAttr(true, MessageTypeUnspecified, MessageTypeNormal, MessageTypeFIFO, MessageTypeDelay,
		MessageTypeTransaction, MessageTypeMixed, MessageTypePriority, MessageTypeLite),
	AttrReserveTime: {changeable: true, verify: func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("value %q is not a long: %w", v, err)
		}
		if n < -1 {
			return fmt.Errorf("value is not in range(%d, %d)", -1, int64(^uint64(0)>>1))
		}
		return nil
	}},
}

// ParseAttributeMods reads an attributes modification, as Java's
// AttributeParser.parseToMap: keys keep their sign ("+message.type" →
// "FIFO", "-reserve.time" → ""). An empty string is no modification.
func ParseAttributeMods(s string) (map[string]string, error) {
	out := map[string]string{}
	if s == "" {
		return out, nil
	}
	for kv := range strings.SplitSeq(s, ",") {
		var key, value string
		if strings.Contains(kv, "=") {
			parts := strings.Split(kv, "=")
			key = parts[0]
			if len(parts) > 1 {
				value = parts[1]
			}
			if !strings.Contains(key, "+") {
				return nil, fmt.Errorf("add/alter attribute format is wrong: %s", key)
			}
		} else {
			key = kv
			if !strings.Contains(key, "-") {
				return nil, fmt.Errorf("delete attribute format is wrong: %s", key)
			}
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("key duplication: %s", key)
		}
		out[key] = value
	}
	return out, nil
}

// FormatAttributeMods writes mods back in the header's syntax, sorted
// (Java's AttributeParser.parseToString, whose order is a HashMap's).
func FormatAttributeMods(mods map[string]string) string {
	keys := slices.Sorted(maps.Keys(mods))
	kvs := make([]string, 0, len(keys))
	for _, k := range keys {
		if v := mods[k]; v != "" {
			kvs = append(kvs, k+"="+v)
		} else {
			kvs = append(kvs, k)
		}
	}
	return strings.Join(kvs, ",")
}

// AlterTopicAttributes applies mods (ParseAttributeMods) to a topic's
// current attributes, as Java's AttributeUtil.alterCurrentAttributes with
// TopicAttributes.ALL: creating, only additions are allowed; an update
// may add, change (changeable attributes only) and delete existing keys.
// It returns the new attributes (nil for none); current is not changed.
func AlterTopicAttributes(create bool, current, mods map[string]string) (map[string]string, error) {
	type change struct {
		key, value  string
		init, erase bool
	}
	var changes []change
	seen := map[string]bool{}
	for _, key := range slices.Sorted(maps.Keys(mods)) {
		value := mods[key]
		if key == "" {
			//lint:ignore ST1005 the remark is Java's text (AttributeParser), which tools match
			return nil, errors.New("kv string format wrong.")
		}
		real := key[1:]
		if real == "" || strings.ContainsAny(real, "+-") {
			//lint:ignore ST1005 the remark is Java's text (AttributeParser), which tools match
			return nil, errors.New("kv string format wrong.")
		}
		if seen[real] {
			return nil, fmt.Errorf("alter duplication key. key: %s", real)
		}
		seen[real] = true
		switch {
		case create && key[0] == '+':
			changes = append(changes, change{key: real, value: value, init: true})
		case create:
			return nil, fmt.Errorf("only add attribute is supported while creating topic. key: %s", real)
		case key[0] == '+':
			changes = append(changes, change{key: real, value: value})
		case key[0] == '-':
			if _, ok := current[real]; !ok {
				return nil, fmt.Errorf("attempt to delete a nonexistent key: %s", real)
			}
			changes = append(changes, change{key: real, erase: true})
		default:
			return nil, fmt.Errorf("wrong format key: %s", real)
		}
	}
	out := maps.Clone(current)
	for _, c := range changes {
		a, ok := topicAttrs[c.key]
		if !ok {
			return nil, fmt.Errorf("unsupported key: %s", c.key)
		}
		if !c.init && !a.changeable {
			return nil, fmt.Errorf("attempt to update an unchangeable attribute. key: %s", c.key)
		}
		if c.erase {
			delete(out, c.key)
			continue
		}
		if err := a.verify(c.value); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string]string{}
		}
		out[c.key] = c.value
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// MessageType is the topic's message.type, NORMAL when it has none (Java's
// TopicConfig.getTopicMessageType).
func (c *TopicConfig) MessageType() string {
	if v, ok := c.Attributes[AttrMessageType]; ok {
		return v
	}
	return MessageTypeNormal
}

// Equal reports whether c and o are the same configuration.
func (c *TopicConfig) Equal(o *TopicConfig) bool {
	return c.TopicName == o.TopicName && c.ReadQueueNums == o.ReadQueueNums && c.WriteQueueNums == o.WriteQueueNums &&
		c.Perm == o.Perm && c.TopicFilterType == o.TopicFilterType && c.TopicSysFlag == o.TopicSysFlag &&
		c.Order == o.Order && maps.Equal(c.Attributes, o.Attributes)
}
