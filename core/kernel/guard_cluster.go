package kernel

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/remoting"
	"github.com/quivermq/quiver/core/store"
)

// LocalCredentialKey is the extFields key of the process's own cluster
// credential: "<covered keys>:<Base64(HMAC-SHA256(key, content))>", where
// key is a random secret made when the process starts and never leaves
// it, and content is the request code, the covered extFields (sorted
// key=value lines) and the body. Sign adds it to every outgoing request;
// the process's own interceptors accept a request carrying a valid one as
// a cluster member's. That is how the broker of `mq dev` registers with
// the name server beside it, with ACL on and no configuration. Other
// processes cannot know the key: for them it is an ignored field (the ACL
// signature covers it like any other).
const LocalCredentialKey = "QuiverLocal"

// localCredential is the process's own cluster credential.
type localCredential struct{ key []byte }

func newLocalCredential() (*localCredential, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("kernel: local credential: %w", err)
	}
	return &localCredential{key: key}, nil
}

func (c *localCredential) mac(code int32, ext map[string]string, keys []string, body []byte) []byte {
	h := hmac.New(sha256.New, c.key)
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], uint32(code))
	h.Write(b[:])
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(k), k, len(ext[k]), ext[k])
	}
	h.Write(body)
	return h.Sum(nil)
}

// sign adds the credential to req, covering the fields it has now.
func (c *localCredential) sign(req *remoting.Command) {
	keys := make([]string, 0, len(req.ExtFields))
	for k := range req.ExtFields {
		if k != LocalCredentialKey && !strings.ContainsAny(k, ",:") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	mac := c.mac(req.Code, req.ExtFields, keys, req.Body)
	req.ExtFields[LocalCredentialKey] = strings.Join(keys, ",") + ":" + base64.StdEncoding.EncodeToString(mac)
}

// valid reports whether req carries a valid credential of this process.
func (c *localCredential) valid(req *remoting.Command) bool {
	v, ok := req.ExtFields[LocalCredentialKey]
	if !ok {
		return false
	}
	i := strings.LastIndexByte(v, ':')
	if i < 0 {
		return false
	}
	var keys []string
	if i > 0 {
		keys = strings.Split(v[:i], ",")
	}
	for j, k := range keys {
		if _, ok := req.ExtFields[k]; !ok || k == LocalCredentialKey || (j > 0 && keys[j-1] >= k) {
			return false
		}
	}
	got, err := base64.StdEncoding.DecodeString(v[i+1:])
	if err != nil {
		return false
	}
	return hmac.Equal(got, c.mac(req.Code, req.ExtFields, keys, req.Body))
}

// lookupHolder holds the message lookup of the broker in this process.
type lookupHolder struct {
	f atomic.Pointer[auth.MessageLookup]
}

func (h *lookupHolder) get() auth.MessageLookup {
	if p := h.f.Load(); p != nil {
		return *p
	}
	return nil
}

// UseStore lets authorization read stored messages (the topic of the
// message a VIEW_MESSAGE_BY_ID, END_TRANSACTION or CONSUMER_SEND_MSG_BACK
// names) from st. The broker module calls it; without it those checks
// refuse every account that is not trusted.
func (g *Guard) UseStore(st store.Store) {
	if g == nil || st == nil {
		return
	}
	f := auth.MessageLookup(func(ctx context.Context, off int64) (auth.StoredMessage, error) {
		rec, err := st.Lookup(ctx, off)
		if err != nil {
			return auth.StoredMessage{}, err
		}
		m, _, err := message.DecodeStored(rec)
		if err != nil {
			return auth.StoredMessage{}, err
		}
		return auth.StoredMessage{Topic: m.Topic, RealTopic: m.Properties[message.PropertyRealTopic]}, nil
	})
	g.lookup.f.Store(&f)
}

// checkerInterceptor checks each request with c: a request with this
// process's own credential passes as a cluster member's; any other is
// authenticated and authorized by the plugin, which can read stored
// messages through UseStore's lookup. A refusal answers NO_PERMISSION
// with the plugin's reason.
func (g *Guard) checkerInterceptor(c auth.Checker) remoting.Interceptor {
	return func(ctx context.Context, p *remoting.Peer, req *remoting.Command) *remoting.Command {
		ans, _ := c.(answerer)
		if g.local != nil && g.local.valid(req) {
			if ans != nil {
				return ans.Answer(ctx, p, req, auth.Principal{Cluster: true, Trusted: true})
			}
			return nil
		}
		var remote string
		if p != nil {
			remote = p.RemoteAddr()
		}
		areq := auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body, Lookup: g.lookup.get()}
		pr, err := c.Check(ctx, areq)
		if err == nil {
			if n, ok := c.(auth.RequestNarrower); ok {
				if body, ok := n.NarrowRequest(ctx, pr, areq); ok {
					req.Body = body
				}
			}
			if ans != nil {
				return ans.Answer(ctx, p, req, pr)
			}
			return nil
		}
		return remoting.NewResponse(req, remoting.NoPermission, err.Error())
	}
}

// answerer is the optional interface of a Checker plugin that serves
// request codes of its own (ACL 2.0's AUTH_* administration codes, which
// no module routes): after the request passed Check (or carries the
// process's credential, as principal p), Answer returns the response, or
// nil to pass the request on. Declared here, as interceptorProvider, for
// core/auth does not import core/remoting.
type answerer interface {
	Answer(ctx context.Context, peer *remoting.Peer, req *remoting.Command, p auth.Principal) *remoting.Command
}

// useFilters installs fs on r: a successful answer with a body is
// narrowed to what the request's sender may see; the process's own
// requests get it whole. A filter's refusal answers NO_PERMISSION.
func (g *Guard) useFilters(r *remoting.Router, fs []auth.AnswerFilter) {
	for _, f := range fs {
		r.UseAnswerFilter(func(ctx context.Context, p *remoting.Peer, req, resp *remoting.Command) *remoting.Command {
			if resp.Code != remoting.Success || len(resp.Body) == 0 || (g.local != nil && g.local.valid(req)) {
				return resp
			}
			var remote string
			if p != nil {
				remote = p.RemoteAddr()
			}
			body, err := f.FilterAnswer(ctx, auth.Request{Code: req.Code, RemoteAddr: remote, ExtFields: req.ExtFields, Body: req.Body}, resp.Body)
			if err != nil {
				return remoting.NewResponse(req, remoting.NoPermission, err.Error())
			}
			resp.Body = body
			return resp
		})
	}
}

// CanSignLocally reports whether this process serves a guarded name
// server, which takes the process's own credential (mq dev).
func (g *Guard) CanSignLocally() bool {
	return g != nil && g.local != nil && g.servesNamesrv.Load()
}
