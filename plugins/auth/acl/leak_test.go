package acl

import "go.uber.org/goleak"

// goleakOptions ignore goroutines the official RocketMQ Go client
// (goclient_test.go) leaves behind after Shutdown: its start-up tasks sleep
// 1 s / 10 s before looking at the closed flag (internal/client.go Start),
// and go-cache's janitor of its global route cache never stops. Nothing of
// this package is ignored.
var goleakOptions = []goleak.Option{
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.1"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.2"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.3"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.4"),
	goleak.IgnoreAnyFunction("github.com/apache/rocketmq-client-go/v2/internal.(*rmqClient).Start.func1.5"),
	goleak.IgnoreTopFunction("github.com/patrickmn/go-cache.(*janitor).Run"),
}
