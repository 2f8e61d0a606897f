package namesrv

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/remoting/codec"
)

// javaVersion is the version a RocketMQ 4.9.4 client sends.
const javaVersion = 395

// javaHeader writes a request header as Java's remoting client does:
// fastjson, fields in name order, extFields keys sorted, no whitespace.
func javaHeader(code, opaque int32, ext map[string]string) []byte {
	var b strings.Builder
	b.WriteString(`{"code":` + strconv.Itoa(int(code)))
	if ext != nil {
		b.WriteString(`,"extFields":{`)
		for i, k := range slices.Sorted(maps.Keys(ext)) {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			vb, _ := json.Marshal(ext[k])
			b.Write(kb)
			b.WriteByte(':')
			b.Write(vb)
		}
		b.WriteString("}")
	}
	b.WriteString(`,"flag":0,"language":"JAVA","opaque":` + strconv.Itoa(int(opaque)) +
		`,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(javaVersion) + `}`)
	return []byte(b.String())
}

// javaInvoke sends one request framed exactly as a Java client frames it
// over a fresh TCP connection and returns the decoded answer.
func javaInvoke(t *testing.T, addr string, code int32, ext map[string]string, body []byte) *remoting.Command {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(5*time.Second)))

	const opaque = 7
	hdr := javaHeader(code, opaque, ext)
	frame := make([]byte, 8, 8+len(hdr)+len(body))
	binary.BigEndian.PutUint32(frame[0:], uint32(4+len(hdr)+len(body)))
	binary.BigEndian.PutUint32(frame[4:], uint32(len(hdr))) // serialize type 0: JSON
	frame = append(append(frame, hdr...), body...)
	_, err = conn.Write(frame)
	require.NoError(t, err)

	var lb [4]byte
	_, err = io.ReadFull(conn, lb[:])
	require.NoError(t, err)
	buf := make([]byte, binary.BigEndian.Uint32(lb[:]))
	_, err = io.ReadFull(conn, buf)
	require.NoError(t, err)
	resp, err := codec.Decode(buf)
	require.NoError(t, err)
	require.True(t, resp.IsResponse())
	require.Equal(t, int32(opaque), resp.Opaque)
	return resp
}
