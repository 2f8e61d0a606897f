package netlimit_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/quivermq/quiver/internal/netlimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// listen is a bounded listener on 127.0.0.1 whose accepted connections
// are held open (and closed at the end).
func listen(t *testing.T, max, perIP int) (*netlimit.Listener, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := netlimit.NewListener(ln, max, perIP, "test", slog.New(slog.DiscardHandler))
	var accepted atomic.Int32
	done := make(chan struct{})
	conns := make(chan net.Conn, 64)
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			conns <- c
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
		close(conns)
		for c := range conns {
			_ = c.Close()
		}
	})
	return l, func() int { return int(accepted.Load()) }
}

// dialFrom connects from local address ip (127.0.0.x) and says whether
// the server kept the connection (a refused one is closed at once).
func dialFrom(t *testing.T, addr, ip string) (net.Conn, bool) {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	return c, errors.As(err, &ne) && ne.Timeout() // still open: the read timed out
}

// TestListenerLimits: connections over the per-IP bound, then over the
// total, are closed at accept and counted; a closed one frees its slot.
func TestListenerLimits(t *testing.T) {
	l, accepted := listen(t, 3, 2)
	addr := l.Addr().String()
	_, ok := dialFrom(t, addr, "127.0.0.1")
	assert.True(t, ok)
	c2, ok := dialFrom(t, addr, "127.0.0.1")
	assert.True(t, ok)
	_, ok = dialFrom(t, addr, "127.0.0.1")
	assert.False(t, ok, "a third connection from one IP over max_connections_per_ip 2")
	_, ok = dialFrom(t, addr, "127.0.0.2")
	assert.True(t, ok, "another IP")
	_, ok = dialFrom(t, addr, "127.0.0.3")
	assert.False(t, ok, "a fourth connection over max_connections 3")
	open, refused := l.Counts()
	assert.Equal(t, 3, open)
	assert.EqualValues(t, 2, refused)
	assert.Equal(t, 3, accepted())
	_ = c2.Close()
	require.Eventually(t, func() bool { o, _ := l.Counts(); return o == 3 }, 5*time.Second, 10*time.Millisecond, "the server side still holds it")
}

// httpClient is a client whose idle connections close with the test.
func httpClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// server serves h within lim on 127.0.0.1 and returns its address.
func server(t *testing.T, lim netlimit.HTTP, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	log := slog.New(slog.DiscardHandler)
	srv := lim.Server(h, log)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lim.Listener(ln, "test", log))
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
		<-done
	})
	return ln.Addr().String()
}

// formHandler answers the length of the form's value "v", or the
// ParseForm error as 413/400.
func formHandler(max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := netlimit.ParseForm(r, max); err != nil {
			code := http.StatusBadRequest
			if errors.Is(err, netlimit.ErrTooLarge) {
				code = http.StatusRequestEntityTooLarge
			}
			http.Error(w, err.Error(), code)
			return
		}
		fmt.Fprint(w, len(r.FormValue("v")))
	})
}

// countingReader yields n bytes of 'a' (a form "v=aaaa…"), counting
// what was read.
type countingReader struct {
	left int64
	read atomic.Int64 // read by the test while the transport may still write
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left == 0 {
		return 0, io.EOF
	}
	n := min(int64(len(p)), c.left)
	for i := range p[:n] {
		p[i] = 'a'
	}
	if c.read.Load() == 0 && n >= 2 {
		p[0], p[1] = 'v', '='
	}
	c.left -= n
	c.read.Add(n)
	return int(n), nil
}

// TestHTTPBodyBounded: a body over MaxBodyBytes is answered 413 —
// without being read when its length is given, and read no further than
// the bound when it is chunked — and a form within it is served; no
// multipart file part reaches the disk.
func TestHTTPBodyBounded(t *testing.T) {
	lim := netlimit.DefaultHTTP()
	lim.MaxBodyBytes = 64 << 10
	addr := server(t, lim, formHandler(lim.MaxBodyBytes))
	url := "http://" + addr + "/"
	cli := httpClient(t)

	resp, err := cli.Post(url, "application/x-www-form-urlencoded", strings.NewReader("v="+strings.Repeat("x", 1000)))
	require.NoError(t, err)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "1000", string(b))

	// Said length over the bound: 413 before the body is read.
	big := &countingReader{left: 100 << 20}
	req, err := http.NewRequest(http.MethodPost, url, big)
	require.NoError(t, err)
	req.ContentLength = big.left
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = cli.Do(req)
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	assert.Less(t, big.read.Load(), int64(32<<20), "the client wrote the whole 100 MiB")

	// Chunked: read up to the bound, then 413.
	chunked := &countingReader{left: 100 << 20}
	req, err = http.NewRequest(http.MethodPost, url, io.NopCloser(chunked))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = cli.Do(req)
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	assert.Less(t, chunked.read.Load(), int64(32<<20), "the server read the whole chunked body")

	// Multipart with a 10 MiB file part: 413, nothing written to disk.
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "multipart-*"))
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	fw, err := mw.CreateFormFile("f", "big.bin")
	require.NoError(t, err)
	_, err = fw.Write(bytes.Repeat([]byte{1}, 10<<20))
	require.NoError(t, err)
	require.NoError(t, mw.Close())
	req, err = http.NewRequest(http.MethodPost, url, io.NopCloser(&mp)) // chunked: no length said
	require.NoError(t, err)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err = cli.Do(req)
	if err == nil {
		resp.Body.Close()
		assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "multipart-*"))
	assert.Len(t, after, len(before), "a multipart file part went to disk")

	// The server still serves.
	resp, err = cli.Post(url, "application/x-www-form-urlencoded", strings.NewReader("v=ok"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

// TestHTTPHeaderBounded: a header over MaxHeaderBytes is refused (431).
func TestHTTPHeaderBounded(t *testing.T) {
	lim := netlimit.DefaultHTTP()
	addr := server(t, lim, formHandler(lim.MaxBodyBytes))
	cli := httpClient(t)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	require.NoError(t, err)
	req.Header.Set("X-Big", strings.Repeat("h", 4*lim.MaxHeaderBytes))
	resp, err := cli.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
}

// closedWithin says whether the server closes c within d.
func closedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestHTTPIdleAndSlowClosed: a keep-alive connection left idle is closed
// after IdleTimeout, and a body trickling in is cut at ReadTimeout.
func TestHTTPIdleAndSlowClosed(t *testing.T) {
	lim := netlimit.DefaultHTTP()
	lim.IdleTimeout, lim.ReadTimeout = 300*time.Millisecond, 500*time.Millisecond
	addr := server(t, lim, formHandler(lim.MaxBodyBytes))

	idle, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer idle.Close()
	_, err = fmt.Fprintf(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.True(t, closedWithin(idle, 10*time.Second), "an idle keep-alive connection stayed open")

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	_, err = fmt.Fprintf(slow, "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nv=")
	require.NoError(t, err)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() { // a byte every 100 ms, for at most 10 s
		defer close(trickled)
		for range 100 {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if _, err := slow.Write([]byte("a")); err != nil {
				return
			}
		}
	}()
	assert.True(t, closedWithin(slow, 10*time.Second), "a trickling body held its connection")
	close(stop)
	<-trickled
}
