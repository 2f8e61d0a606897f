package acl

import (
	"maps"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/auth"
	"github.com/quivermq/quiver/core/remoting"
)

// strictACL opens testYAML with acl.strict_signatures = mode and a clock
// the test moves.
func strictACL(t *testing.T, mode string) (*ACL, *time.Time) {
	t.Helper()
	a, _, _ := newACL(t, testYAML)
	a.signMode = mode
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a.now = func() time.Time { return now }
	return a, &now
}

func strictSigned(code int32, ext map[string]string, body []byte, ak string, at time.Time) auth.Request {
	ext = maps.Clone(ext)
	if ext == nil {
		ext = map[string]string{}
	}
	SignStrict(code, ext, body, ak, secretOf(ak), "", at)
	return auth.Request{Code: code, RemoteAddr: "172.16.0.9:51234", ExtFields: ext, Body: body}
}

// TestStrictSignatureBindsTheCode: the attack of issue 22. An admin's
// signed GET_ROUTEINFO_BY_TOPIC for topic T, re-sent unchanged as
// DELETE_TOPIC_IN_BROKER (both carry only "topic"), passes with ACL 1.0
// signatures and is refused with a strict one.
func TestStrictSignatureBindsTheCode(t *testing.T) {
	a, now := strictACL(t, SignAccept)
	route := map[string]string{"topic": "TopicB"}

	v1 := signed(remoting.GetRouteInfoByTopic, route, nil, "rocketmq2")
	_, err := a.Check(ctx, v1)
	require.NoError(t, err)
	v1.Code = remoting.DeleteTopicInBroker
	_, err = a.Check(ctx, v1)
	assert.NoError(t, err, "ACL 1.0 cannot tell: the re-targeted request passes (documented in docs/SECURITY.md)")

	v2 := strictSigned(remoting.GetRouteInfoByTopic, route, nil, "rocketmq2", *now)
	_, err = a.Check(ctx, v2)
	require.NoError(t, err)
	v2.Code = remoting.DeleteTopicInBroker
	_, err = a.Check(ctx, v2)
	require.Error(t, err)
	assert.ErrorIs(t, err, auth.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "Check signature failed for accessKey=rocketmq2")
}

// TestStrictSignatureReplay: a strict request is accepted once; the same
// bytes again are a replay. ACL 1.0 accepts the copy.
func TestStrictSignatureReplay(t *testing.T) {
	a, now := strictACL(t, SignAccept)
	send := map[string]string{"b": "topicB", "a": "PG"}
	v1 := signed(remoting.SendMessageV2, send, []byte("body"), "RocketMQ")
	for i := 0; i < 3; i++ {
		_, err := a.Check(ctx, v1)
		require.NoError(t, err, "ACL 1.0 copy %d", i)
	}
	v2 := strictSigned(remoting.SendMessageV2, send, []byte("body"), "RocketMQ", *now)
	_, err := a.Check(ctx, v2)
	require.NoError(t, err)
	*now = now.Add(time.Minute)
	_, err = a.Check(ctx, v2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "replayed request refused")
	// Another nonce from the same account is fine.
	_, err = a.Check(ctx, strictSigned(remoting.SendMessageV2, send, []byte("body"), "RocketMQ", *now))
	require.NoError(t, err)
	// Outside the window the timestamp is refused, whatever the nonce.
	*now = now.Add(DefaultSignatureWindow + 2*time.Minute)
	_, err = a.Check(ctx, v2)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "outside the 1m0s window")
	// Changing the timestamp or the nonce breaks the signature.
	forged := strictSigned(remoting.SendMessageV2, send, []byte("body"), "RocketMQ", now.Add(-10*time.Minute))
	forged.ExtFields[KeyTimestamp] = itoa(now.UnixMilli())
	_, err = a.Check(ctx, forged)
	assert.ErrorContains(t, err, "Check signature failed")
	// The body is covered, and a strict request cannot be passed off as
	// ACL 1.0 by dropping the version.
	tampered := strictSigned(remoting.SendMessageV2, send, []byte("body"), "RocketMQ", *now)
	tampered.Body = []byte("bodz")
	_, err = a.Check(ctx, tampered)
	assert.ErrorContains(t, err, "Check signature failed")
	stripped := strictSigned(remoting.SendMessageV2, send, []byte("body"), "RocketMQ", *now)
	delete(stripped.ExtFields, KeySignVersion)
	_, err = a.Check(ctx, stripped)
	assert.ErrorContains(t, err, "Check signature failed")
}

// TestStrictSignatureModes: require refuses ACL 1.0 (official clients),
// accept takes both; SignCode follows the mode.
func TestStrictSignatureModes(t *testing.T) {
	route := map[string]string{"topic": "TopicB"}
	a, now := strictACL(t, SignRequire)
	_, err := a.Check(ctx, signed(remoting.GetRouteInfoByTopic, route, nil, "RocketMQ"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "a strict signature is required for accessKey=RocketMQ")
	ext := maps.Clone(route)
	goClientSign(ext, nil, "RocketMQ", skUser, "")
	_, err = a.Check(ctx, auth.Request{Code: remoting.GetRouteInfoByTopic, RemoteAddr: "172.16.0.9:1", ExtFields: ext})
	assert.Error(t, err, "the official Go client's signature is ACL 1.0")
	_, err = a.Check(ctx, strictSigned(remoting.GetRouteInfoByTopic, route, nil, "RocketMQ", *now))
	require.NoError(t, err)
	// White-listed addresses still skip signatures (RocketMQ semantics).
	_, err = a.Check(ctx, auth.Request{Code: remoting.GetRouteInfoByTopic, RemoteAddr: "10.10.103.1:1", ExtFields: route})
	require.NoError(t, err)

	// SignCode: strict unless off.
	a.ak, a.sk = "RocketMQ", skUser
	ext = map[string]string{"topic": "TopicB"}
	require.True(t, a.SignCode(remoting.GetRouteInfoByTopic, ext, nil))
	assert.Equal(t, SignVersion2, ext[KeySignVersion])
	_, err = a.Check(ctx, auth.Request{Code: remoting.GetRouteInfoByTopic, RemoteAddr: "172.16.0.9:1", ExtFields: ext})
	require.NoError(t, err)
	a.signMode = SignOff
	ext = map[string]string{"topic": "TopicB"}
	require.True(t, a.SignCode(remoting.GetRouteInfoByTopic, ext, nil))
	assert.NotContains(t, ext, KeySignVersion)
}

// TestStrictContentUnambiguous: ACL 1.0 content concatenates values, so
// bytes can move from one field to the next; the strict content cannot.
func TestStrictContentUnambiguous(t *testing.T) {
	x := map[string]string{"a": "ab", "b": "c"}
	y := map[string]string{"a": "a", "b": "bc"}
	assert.Equal(t, Content(x, nil), Content(y, nil))
	assert.NotEqual(t, StrictContent(1, x, nil), StrictContent(1, y, nil))
	assert.NotEqual(t, StrictContent(1, x, nil), StrictContent(2, x, nil))
	assert.NotEqual(t, StrictContent(1, map[string]string{"a": "b"}, []byte("c")), StrictContent(1, map[string]string{"a": "bc"}, nil))
}

func TestNonceCacheBounded(t *testing.T) {
	c := newNonceCache(time.Minute, 2)
	t0 := time.Unix(1000, 0)
	seen, full := c.add("a", t0)
	assert.False(t, seen || full)
	seen, _ = c.add("a", t0.Add(59*time.Second))
	assert.True(t, seen)
	_, _ = c.add("b", t0)
	_, full = c.add("c", t0)
	assert.True(t, full, "a third key in one generation is refused, not evicted")
	// After one period "a" is still remembered (previous generation).
	seen, _ = c.add("a", t0.Add(61*time.Second))
	assert.True(t, seen)
	// After two periods it is forgotten.
	seen, full = c.add("a", t0.Add(3*time.Minute))
	assert.False(t, seen || full)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
