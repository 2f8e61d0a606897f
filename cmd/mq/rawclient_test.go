package main

import (
	"github.com/quivermq/quiver/client/transports"
	"github.com/quivermq/quiver/core/remoting"
)

// benchClient is a bare remoting client dialling by address scheme, for
// tests that set up state with requests no admin command makes (sending
// a message back, a consumer heartbeat). The commands themselves go
// through client/admin (TestAdminLayer).
func benchClient() *remoting.Client {
	set := transports.NewSet(transports.WithInsecureQUIC())
	return remoting.NewClient(set.Dial, nil, nil, remoting.PeerOptions{})
}
