package codec

// ForgetPool clears c's pooled-map mark so tests can compare decoded
// commands with literals; it returns c.
func ForgetPool(c *Command) *Command {
	c.pooledExt = false
	return c
}

// PooledExt reports whether c's ExtFields came from the decoder's pool.
func PooledExt(c *Command) bool { return c.pooledExt }

// Release gives c's pooled map back, as the router does after a scoped
// handler.
func Release(c *Command) { c.Release() }

// CodecCodes are the request codes the codec treats apart, in the order
// SEND_MESSAGE, PULL_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE.
var CodecCodes = []int32{sendMessage, pullMessage, sendMessageV2, sendBatchMessage}
