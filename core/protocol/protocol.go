// Package protocol holds the JSON bodies and well-known names of RocketMQ's
// remoting protocol that name servers, brokers and clients share.
package protocol

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Permission bits (Java PermName).
const (
	PermPriority = 8
	PermRead     = 4
	PermWrite    = 2
	PermInherit  = 1
)

// Well-known topics and groups.
const (
	AutoCreateTopic      = "TBW102"
	ScheduleTopic        = "SCHEDULE_TOPIC_XXXX"
	TransHalfTopic       = "RMQ_SYS_TRANS_HALF_TOPIC"
	TransOpHalfTopic     = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
	TransCheckMaxTopic   = "TRANS_CHECK_MAX_TIME_TOPIC"
	SelfTestTopic        = "SELF_TEST_TOPIC"
	OffsetMovedEvent     = "OFFSET_MOVED_EVENT"
	TraceTopic           = "RMQ_SYS_TRACE_TOPIC"
	RetryGroupPrefix     = "%RETRY%"
	DLQGroupPrefix       = "%DLQ%"
	SystemTopicPrefix    = "rmq_sys_"
	DefaultCluster       = "DefaultCluster"
	MasterID             = 0
	DefaultTopicQueueNum = 4
)

// BuiltinGroups are the subscription groups every Java broker has
// (SubscriptionGroupManager.init: MixAll's TOOLS_CONSUMER_GROUP,
// FILTERSRV_CONSUMER_GROUP, SELF_TEST_CONSUMER_GROUP, ONS_HTTP_PROXY_GROUP,
// CID_ONSAPI_PULL_GROUP, CID_ONSAPI_PERMISSION_GROUP,
// CID_ONSAPI_OWNER_GROUP, CID_SYS_RMQ_TRANS), in its order.
var BuiltinGroups = [...]string{"TOOLS_CONSUMER", "FILTERSRV_CONSUMER", "SELF_TEST_C_GROUP", "CID_ONS-HTTP-PROXY",
	"CID_ONSAPI_PULL", "CID_ONSAPI_PERMISSION", "CID_ONSAPI_OWNER", "CID_RMQ_SYS_TRANS"}

// IsSystemGroup reports a built-in group or one of RocketMQ's
// CID_RMQ_SYS_ groups.
func IsSystemGroup(g string) bool {
	for _, b := range BuiltinGroups {
		if g == b {
			return true
		}
	}
	return strings.HasPrefix(g, "CID_RMQ_SYS_")
}

// RetryTopic returns %RETRY%<group>.
func RetryTopic(group string) string { return RetryGroupPrefix + group }

// DLQTopic returns %DLQ%<group>.
func DLQTopic(group string) string { return DLQGroupPrefix + group }

// IsRetryTopic reports a %RETRY% topic.
func IsRetryTopic(t string) bool { return strings.HasPrefix(t, RetryGroupPrefix) }

// IsSystemTopic reports topics clients may not send to directly.
func IsSystemTopic(t string) bool {
	switch t {
	case ScheduleTopic, TransHalfTopic, TransOpHalfTopic, TransCheckMaxTopic, SelfTestTopic, OffsetMovedEvent:
		return true
	}
	return false
}

// ValidateTopic checks RocketMQ's topic rules: ^[%|a-zA-Z0-9_-]+$, at most
// 127 characters.
func ValidateTopic(t string) error {
	if t == "" {
		return fmt.Errorf("the specified topic is blank")
	}
	if len(t) > 127 {
		return fmt.Errorf("the specified topic is longer than topic max length 127")
	}
	if !validName(t) {
		return fmt.Errorf("the specified topic[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", t)
	}
	return nil
}

// ValidateGroup checks group names: the same characters, at most 255.
func ValidateGroup(g string) error {
	if g == "" {
		return fmt.Errorf("the specified group is blank")
	}
	if len(g) > 255 {
		return fmt.Errorf("the specified group is longer than group max length 255")
	}
	if !validName(g) {
		return fmt.Errorf("the specified group[%s] contains illegal characters, allowing only ^[%%|a-zA-Z0-9_-]+$", g)
	}
	return nil
}

func validName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '%', c == '|', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// DataVersion tracks changes of a broker's topic table.
type DataVersion struct {
	Timestamp int64 `json:"timestamp"`
	Counter   int64 `json:"counter"`
}

// TopicConfig is a broker's configuration of one topic.
type TopicConfig struct {
	TopicName       string `json:"topicName"`
	ReadQueueNums   int32  `json:"readQueueNums"`
	WriteQueueNums  int32  `json:"writeQueueNums"`
	Perm            int32  `json:"perm"`
	TopicFilterType string `json:"topicFilterType"`
	TopicSysFlag    int32  `json:"topicSysFlag"`
	Order           bool   `json:"order"`
	// Attributes are RocketMQ 5's topic attributes (topicattr.go), such
	// as message.type; Java writes "attributes":{} for none, left out
	// here (Java reads an absent field as empty). Never changed in place:
	// a change replaces the map.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// QueueData is a topic's queue layout on one broker, in a route.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSysFlag   int32  `json:"topicSysFlag"`
}

// BrokerData is one broker group: its name, cluster and addresses by id.
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}

// TopicRouteData is the GET_ROUTEINFO_BY_TOPIC answer.
type TopicRouteData struct {
	OrderTopicConf    string              `json:"orderTopicConf,omitempty"`
	QueueDatas        []QueueData         `json:"queueDatas"`
	BrokerDatas       []BrokerData        `json:"brokerDatas"`
	FilterServerTable map[string][]string `json:"filterServerTable"`
}

// Encode returns compact JSON with quoted numeric keys; queueDatas and
// brokerAddrs are always present, as the Go client needs.
func (r *TopicRouteData) Encode() []byte {
	c := *r
	if c.QueueDatas == nil {
		c.QueueDatas = []QueueData{}
	}
	if c.BrokerDatas == nil {
		c.BrokerDatas = []BrokerData{}
	}
	for i := range c.BrokerDatas {
		if c.BrokerDatas[i].BrokerAddrs == nil {
			c.BrokerDatas[i].BrokerAddrs = map[int64]string{}
		}
	}
	if c.FilterServerTable == nil {
		c.FilterServerTable = map[string][]string{}
	}
	b, _ := json.Marshal(&c)
	return b
}

// DecodeTopicRouteData reads a GET_ROUTEINFO_BY_TOPIC answer: standard
// JSON, or what a Java name server's fastjson writes (brokerAddrs keyed by
// unquoted numbers, {0:"..."}).
func DecodeTopicRouteData(body []byte) (*TopicRouteData, error) {
	var rd TopicRouteData
	if err := json.Unmarshal(body, &rd); err == nil {
		return &rd, nil
	}
	rd = TopicRouteData{}
	if err := UnmarshalFastjson(body, &rd); err != nil {
		return nil, fmt.Errorf("protocol: decode route: %w", err)
	}
	return &rd, nil
}

// ClusterInfo is the GET_BROKER_CLUSTER_INFO answer.
type ClusterInfo struct {
	BrokerAddrTable  map[string]*BrokerData `json:"brokerAddrTable"`
	ClusterAddrTable map[string][]string    `json:"clusterAddrTable"`
}

// TopicList is the GET_ALL_TOPIC_LIST_FROM_NAMESERVER answer.
type TopicList struct {
	TopicList  []string `json:"topicList"`
	BrokerAddr string   `json:"brokerAddr,omitempty"`
}

// TopicConfigWrapper carries a broker's topics in REGISTER_BROKER.
type TopicConfigWrapper struct {
	DataVersion      DataVersion             `json:"dataVersion"`
	TopicConfigTable map[string]*TopicConfig `json:"topicConfigTable"`
}

// RegisterBrokerBody is the uncompressed REGISTER_BROKER body.
type RegisterBrokerBody struct {
	TopicConfigSerializeWrapper TopicConfigWrapper `json:"topicConfigSerializeWrapper"`
	FilterServerList            []string           `json:"filterServerList"`
}

// SubscriptionData is one subscription in a heartbeat.
type SubscriptionData struct {
	ClassFilterMode bool      `json:"classFilterMode"`
	Topic           string    `json:"topic"`
	SubString       string    `json:"subString"`
	TagsSet         []string  `json:"tagsSet"`
	CodeSet         FlexInts  `json:"codeSet"`
	SubVersion      FlexInt64 `json:"subVersion"`
	ExpressionType  string    `json:"expressionType"`
}

// ConsumerData is one consumer group of a heartbeat.
type ConsumerData struct {
	GroupName           string             `json:"groupName"`
	ConsumeType         string             `json:"consumeType"`
	MessageModel        string             `json:"messageModel"`
	ConsumeFromWhere    string             `json:"consumeFromWhere"`
	SubscriptionDataSet []SubscriptionData `json:"subscriptionDataSet"`
	UnitMode            bool               `json:"unitMode"`
}

// ProducerData is one producer group of a heartbeat.
type ProducerData struct {
	GroupName string `json:"groupName"`
}

// HeartbeatData is the HEART_BEAT body.
type HeartbeatData struct {
	ClientID        string         `json:"clientID"`
	ProducerDataSet []ProducerData `json:"producerDataSet"`
	ConsumerDataSet []ConsumerData `json:"consumerDataSet"`
}

// Message models.
const (
	Clustering   = "CLUSTERING"
	Broadcasting = "BROADCASTING"
)

// ConsumerIDList is the GET_CONSUMER_LIST_BY_GROUP answer.
type ConsumerIDList struct {
	ConsumerIDList []string `json:"consumerIdList"`
}

// MessageQueue names a queue of a broker.
type MessageQueue struct {
	Topic      string `json:"topic"`
	BrokerName string `json:"brokerName"`
	QueueID    int32  `json:"queueId"`
}

// LockBatchRequest is the LOCK_BATCH_MQ / UNLOCK_BATCH_MQ body.
type LockBatchRequest struct {
	ConsumerGroup string         `json:"consumerGroup"`
	ClientID      string         `json:"clientId"`
	MQSet         []MessageQueue `json:"mqSet"`
}

// LockBatchResponse is the LOCK_BATCH_MQ answer.
type LockBatchResponse struct {
	LockOKMQSet []MessageQueue `json:"lockOKMQSet"`
}

// FlexInt64 decodes a JSON number or a string holding one, as int64
// without float rounding.
type FlexInt64 int64

// UnmarshalJSON implements json.Unmarshaler.
func (f *FlexInt64) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		fl, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil {
			return fmt.Errorf("protocol: bad integer %s", b)
		}
		n = int64(fl)
	}
	*f = FlexInt64(n)
	return nil
}

// FlexInts decodes a JSON array of numbers or numeric strings.
type FlexInts []int64

// UnmarshalJSON implements json.Unmarshaler.
func (f *FlexInts) UnmarshalJSON(b []byte) error {
	var raw []FlexInt64
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make([]int64, len(raw))
	for i, v := range raw {
		out[i] = int64(v)
	}
	*f = out
	return nil
}
