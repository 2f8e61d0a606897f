package testserver

import "github.com/quivermq/quiver/core/transport"

type transportConn = transport.Conn
