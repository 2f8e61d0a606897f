// Package interop drives a real `mq dev`, built from this tree, with the
// official RocketMQ Go client (github.com/apache/rocketmq-client-go/v2)
// unchanged: whatever works here works for existing RocketMQ applications.
package interop
