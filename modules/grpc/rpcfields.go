package grpc

// fieldRead marks a request field the endpoint reads (to act on it, to
// authorize it, or to echo it in the answer).
const fieldRead = ""

// Reasons shared by several fields.
const (
	whyServerSet  = "set by the server when it stores or delivers the message; a sender's value is not kept"
	whyEchoed     = "echoed back in the answered settings, not acted on"
	whyHandle     = "the receipt handle names the message"
	whyToClient   = "a server-to-client command: the server never reads one from a client"
	whyNeverAsked = "the answer to a command the server never sends"
	whyPopQueue   = "pop consumption: the broker picks the queue of the topic"
)

// requestFields classifies every field of a served RPC's request and of
// the messages under the fields it reads (rpctable.go walks them):
// fieldRead, or why the endpoint ignores it. A key "RPC/Message.field"
// overrides "Message.field" for that RPC. RPCTable fails on a field
// without an entry and on an entry no served request reaches, so a proto
// change or a newly served RPC cannot leave the table behind; the
// ignored fields are listed in docs/COMPATIBILITY.md.
var requestFields = map[string]string{
	// Shared messages.
	"Resource.resource_namespace":       fieldRead, // namespace.go
	"Resource.name":                     fieldRead,
	"FilterExpression.type":             fieldRead,
	"FilterExpression.expression":       fieldRead,
	"MessageQueue.topic":                fieldRead,
	"MessageQueue.id":                   fieldRead,
	"MessageQueue.permission":           "the server knows its queues' permissions",
	"MessageQueue.broker":               "the request is served by the broker it reaches",
	"MessageQueue.accept_message_types": "the topic's `message.type` attribute decides",

	"QueryRouteRequest.topic":     fieldRead,
	"QueryRouteRequest.endpoints": "the answer names each broker's host with this endpoint's gRPC port",

	"HeartbeatRequest.group":       fieldRead, // authorization
	"HeartbeatRequest.client_type": fieldRead, // authorization: a consumer's needs SUB on the group

	"SendMessageRequest.messages":                             fieldRead,
	"Message.topic":                                           fieldRead,
	"Message.user_properties":                                 fieldRead,
	"Message.system_properties":                               fieldRead,
	"Message.body":                                            fieldRead,
	"SystemProperties.tag":                                    fieldRead,
	"SystemProperties.keys":                                   fieldRead,
	"SystemProperties.message_id":                             fieldRead,
	"SystemProperties.body_digest":                            "not verified: the store checks its own CRC of the record",
	"SystemProperties.body_encoding":                          fieldRead,
	"SystemProperties.message_type":                           fieldRead,
	"SystemProperties.born_timestamp":                         fieldRead,
	"SystemProperties.born_host":                              fieldRead,
	"SystemProperties.store_timestamp":                        whyServerSet,
	"SystemProperties.store_host":                             whyServerSet,
	"SystemProperties.delivery_timestamp":                     fieldRead,
	"SystemProperties.receipt_handle":                         whyServerSet,
	"SystemProperties.queue_id":                               "the broker picks the queue (by message group for FIFO)",
	"SystemProperties.queue_offset":                           whyServerSet,
	"SystemProperties.invisible_duration":                     whyServerSet,
	"SystemProperties.delivery_attempt":                       whyServerSet,
	"SystemProperties.message_group":                          fieldRead,
	"SystemProperties.trace_context":                          fieldRead,
	"SystemProperties.orphaned_transaction_recovery_duration": fieldRead,
	"SystemProperties.dead_letter_queue":                      whyServerSet,
	"SystemProperties.lite_topic":                             fieldRead, // lite.go
	"SystemProperties.priority":                               fieldRead,

	"QueryAssignmentRequest.topic":     fieldRead,
	"QueryAssignmentRequest.group":     fieldRead,
	"QueryAssignmentRequest.endpoints": "the answer names each broker's host with this endpoint's gRPC port",

	"ReceiveMessageRequest.group":                fieldRead,
	"ReceiveMessageRequest.message_queue":        fieldRead,
	"ReceiveMessage/MessageQueue.id":             whyPopQueue,
	"ReceiveMessageRequest.filter_expression":    fieldRead,
	"ReceiveMessageRequest.batch_size":           fieldRead,
	"ReceiveMessageRequest.invisible_duration":   fieldRead,
	"ReceiveMessageRequest.auto_renew":           "the server does not renew invisibility: the client's ChangeInvisibleDuration does",
	"ReceiveMessageRequest.long_polling_timeout": fieldRead,
	"ReceiveMessageRequest.attempt_id":           "a retried receive is not matched to its earlier attempt: messages it popped become visible again after their invisible duration",

	"AckMessageRequest.group":        fieldRead,
	"AckMessageRequest.topic":        fieldRead,
	"AckMessageRequest.entries":      fieldRead,
	"AckMessageEntry.message_id":     fieldRead, // echoed in the answer's entry
	"AckMessageEntry.receipt_handle": fieldRead,
	"AckMessageEntry.lite_topic":     fieldRead,

	"ForwardMessageToDeadLetterQueueRequest.group":                 fieldRead,
	"ForwardMessageToDeadLetterQueueRequest.topic":                 fieldRead,
	"ForwardMessageToDeadLetterQueueRequest.receipt_handle":        fieldRead,
	"ForwardMessageToDeadLetterQueueRequest.message_id":            whyHandle,
	"ForwardMessageToDeadLetterQueueRequest.delivery_attempt":      "the pop service counts the attempts itself",
	"ForwardMessageToDeadLetterQueueRequest.max_delivery_attempts": "the group's retry policy decides",
	"ForwardMessageToDeadLetterQueueRequest.lite_topic":            fieldRead,

	"PullMessageRequest.group":                fieldRead,
	"PullMessageRequest.message_queue":        fieldRead,
	"PullMessageRequest.offset":               fieldRead,
	"PullMessageRequest.batch_size":           fieldRead,
	"PullMessageRequest.filter_expression":    fieldRead,
	"PullMessageRequest.long_polling_timeout": fieldRead,

	"UpdateOffsetRequest.group":         fieldRead,
	"UpdateOffsetRequest.message_queue": fieldRead,
	"UpdateOffsetRequest.offset":        fieldRead,

	"GetOffsetRequest.group":         fieldRead,
	"GetOffsetRequest.message_queue": fieldRead,

	"QueryOffsetRequest.message_queue":       fieldRead,
	"QueryOffsetRequest.query_offset_policy": fieldRead,
	"QueryOffsetRequest.timestamp":           fieldRead,

	"EndTransactionRequest.topic":          fieldRead,
	"EndTransactionRequest.message_id":     fieldRead,
	"EndTransactionRequest.transaction_id": fieldRead,
	"EndTransactionRequest.resolution":     fieldRead,
	"EndTransactionRequest.source":         fieldRead,
	"EndTransactionRequest.trace_context":  "not traced",

	"TelemetryCommand.status":                               "a client's status is not read",
	"TelemetryCommand.settings":                             fieldRead,
	"TelemetryCommand.thread_stack_trace":                   whyNeverAsked,
	"TelemetryCommand.verify_message_result":                whyNeverAsked,
	"TelemetryCommand.recover_orphaned_transaction_command": whyToClient,
	"TelemetryCommand.print_thread_stack_trace_command":     whyToClient,
	"TelemetryCommand.verify_message_command":               whyToClient,
	"TelemetryCommand.reconnect_endpoints_command":          whyToClient,
	"TelemetryCommand.notify_unsubscribe_lite_command":      whyToClient,
	"Settings.client_type":                                  fieldRead,
	"Settings.access_point":                                 whyEchoed,
	"Settings.backoff_policy":                               "a publisher's is echoed back (the Java producer's default when absent); a subscriber's is replaced by the group's retry policy",
	"Settings.request_timeout":                              whyEchoed,
	"Settings.publishing":                                   fieldRead,
	"Settings.subscription":                                 fieldRead,
	"Settings.user_agent":                                   whyEchoed,
	"Settings.metric":                                       whyEchoed + ": no client metrics are collected",
	"Settings.client_properties":                            whyEchoed,
	"Publishing.topics":                                     fieldRead,
	"Publishing.max_body_size":                              "the server's limit is answered",
	"Publishing.validate_message_type":                      "answered true, as the proxy",
	"Subscription.group":                                    fieldRead,
	"Subscription.subscriptions":                            fieldRead,
	"Subscription.fifo":                                     fieldRead,
	"Subscription.receive_batch_size":                       whyEchoed + " (32 when absent): each ReceiveMessage names its batch size",
	"Subscription.long_polling_timeout":                     whyEchoed + " (20 s when absent): each ReceiveMessage names its timeout",
	"Subscription.lite_subscription_quota":                  "the server's grpc.lite.subscription_quota is answered to lite consumers",
	"Subscription.max_lite_topic_size":                      "the server's grpc.lite.max_name_length is answered to lite consumers",
	"SubscriptionEntry.topic":                               fieldRead, // authorization
	"SubscriptionEntry.expression":                          "each ReceiveMessage names its filter",

	"NotifyClientTerminationRequest.group": fieldRead, // authorization

	"ChangeInvisibleDurationRequest.group":              fieldRead,
	"ChangeInvisibleDurationRequest.topic":              fieldRead,
	"ChangeInvisibleDurationRequest.receipt_handle":     fieldRead,
	"ChangeInvisibleDurationRequest.invisible_duration": fieldRead,
	"ChangeInvisibleDurationRequest.message_id":         whyHandle,
	"ChangeInvisibleDurationRequest.lite_topic":         fieldRead,
	"ChangeInvisibleDurationRequest.suspend":            "not acted on: the lite topic's delivery waits for its invisible time, then goes out again",

	"SyncLiteSubscriptionRequest.action":         fieldRead,
	"SyncLiteSubscriptionRequest.topic":          fieldRead,
	"SyncLiteSubscriptionRequest.group":          fieldRead,
	"SyncLiteSubscriptionRequest.lite_topic_set": fieldRead,
	"SyncLiteSubscriptionRequest.version":        "not compared: each request is applied as it arrives",
	"SyncLiteSubscriptionRequest.offset_option":  fieldRead,
	"OffsetOption.policy":                        fieldRead,
	"OffsetOption.offset":                        fieldRead,
	"OffsetOption.tail_n":                        fieldRead,
	"OffsetOption.timestamp":                     fieldRead,

	"RecallMessageRequest.topic":         fieldRead,
	"RecallMessageRequest.recall_handle": fieldRead,
}
