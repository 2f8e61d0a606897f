package grpc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRequestFieldsComplete: a request field of a served RPC without an
// entry in requestFields, or an entry no served request reaches, fails
// RPCTable (and so cmd/mq's TestCompatibilityDoc).
func TestRequestFieldsComplete(t *testing.T) {
	_, err := RPCTable()
	require.NoError(t, err)

	const key = "SystemProperties.body_digest"
	saved := requestFields[key]
	delete(requestFields, key)
	_, err = RPCTable()
	requestFields[key] = saved
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SendMessage/"+key)

	requestFields["SendMessageRequest.no_such_field"] = "x"
	_, err = RPCTable()
	delete(requestFields, "SendMessageRequest.no_such_field")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "SendMessageRequest.no_such_field")

	// A field under an ignored one is not walked, so needs no entry.
	requestFields["Endpoints.scheme"] = fieldRead
	_, err = RPCTable()
	delete(requestFields, "Endpoints.scheme")
	require.Error(t, err, "Endpoints is only under ignored fields")
}
