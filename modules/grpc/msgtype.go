package grpc

import (
	"slices"
	"strings"

	"github.com/quivermq/quiver/core/grpcapi"
	"github.com/quivermq/quiver/core/protocol"
)

// Topic message types (RocketMQ 5's message.type topic attribute, set
// with `mq admin updateTopic -a +message.type=FIFO`). A topic that has the
// attribute takes only messages of its type over gRPC, as RocketMQ's
// proxy checks them (ProducerProcessor with DefaultTopicMessageTypeValidator,
// enableTopicMessageTypeCheck on by default): anything else is refused
// with MESSAGE_PROPERTY_CONFLICT_WITH_TYPE; MIXED takes every type,
// UNSPECIFIED none. Unlike the proxy, which reads a topic without the
// attribute as NORMAL, such a topic (every topic made by 4.x tools) takes
// every type, so that FIFO, delay and transactional producers keep
// working on topics created before types existed. Retry and dead-letter
// topics are not checked, and neither are 4.x sends (Java's broker does
// not check them either).

// messageTypeOf is the Java TopicMessageType of a message as the proxy
// derives it from the properties it builds (TopicMessageType.
// parseFromMessageProperty): transactional, else delayed, else with a
// message group FIFO, else with a priority PRIORITY, else NORMAL. A
// priority makes a PRIORITY message whatever type the client declared:
// the official clients send priority 0 as a NORMAL message that carries
// priority 0 (the Node.js client tests the value for truth).
func messageTypeOf(sp *grpcapi.SystemProperties) string {
	switch {
	case sp.LiteTopic != nil || sp.GetMessageType() == grpcapi.MessageType_LITE: // lite.go
		return protocol.MessageTypeLite
	case sp.GetMessageType() == grpcapi.MessageType_TRANSACTION:
		return protocol.MessageTypeTransaction
	case sp.GetDeliveryTimestamp() != nil:
		return protocol.MessageTypeDelay
	case sp.GetMessageGroup() != "":
		return protocol.MessageTypeFIFO
	case sp.Priority != nil || sp.GetMessageType() == grpcapi.MessageType_PRIORITY:
		return protocol.MessageTypePriority
	}
	return protocol.MessageTypeNormal
}

// checkMessageType refuses a message whose type its topic does not take.
func checkMessageType(tc *protocol.TopicConfig, sp *grpcapi.SystemProperties) *sendError {
	want, typed := tc.Attributes[protocol.AttrMessageType]
	if !typed || want == protocol.MessageTypeMixed || protocol.IsRetryTopic(tc.TopicName) ||
		strings.HasPrefix(tc.TopicName, protocol.DLQGroupPrefix) {
		return nil
	}
	if got := messageTypeOf(sp); got != want {
		return refuse(grpcapi.Code_MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
			"TopicMessageType validate failed, the expected type is %s, but actual type is %s", want, got)
	}
	return nil
}

// untypedAcceptTypes are the types of a topic that takes every type: the
// four of RocketMQ 5.0 and PRIORITY (5.4).
var untypedAcceptTypes = append(slices.Clone(acceptTypes), grpcapi.MessageType_PRIORITY)

// topicAcceptTypes are the message types a route answers for the topic
// (the proxy's RouteActivity.parseTopicMessageType): its message.type, all
// five for MIXED or a topic without the attribute.
func topicAcceptTypes(tc *protocol.TopicConfig, found bool) []grpcapi.MessageType {
	if !found {
		return untypedAcceptTypes
	}
	want, typed := tc.Attributes[protocol.AttrMessageType]
	if !typed {
		return untypedAcceptTypes
	}
	switch want {
	case protocol.MessageTypeNormal:
		return []grpcapi.MessageType{grpcapi.MessageType_NORMAL}
	case protocol.MessageTypeFIFO:
		return []grpcapi.MessageType{grpcapi.MessageType_FIFO}
	case protocol.MessageTypeDelay:
		return []grpcapi.MessageType{grpcapi.MessageType_DELAY}
	case protocol.MessageTypeTransaction:
		return []grpcapi.MessageType{grpcapi.MessageType_TRANSACTION}
	case protocol.MessageTypePriority:
		return []grpcapi.MessageType{grpcapi.MessageType_PRIORITY}
	case protocol.MessageTypeLite:
		return []grpcapi.MessageType{grpcapi.MessageType_LITE}
	case protocol.MessageTypeMixed:
		return untypedAcceptTypes
	}
	return []grpcapi.MessageType{grpcapi.MessageType_MESSAGE_TYPE_UNSPECIFIED}
}
