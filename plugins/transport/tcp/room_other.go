//go:build !linux

package tcp

// SendRoom is 0 where the socket's queue cannot be read: remoting then
// leaves every held request's answer to the connection's writer.
func (c *Conn) SendRoom() int { return 0 }
