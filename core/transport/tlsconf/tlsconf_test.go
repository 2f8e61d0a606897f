package tlsconf

import (
	"crypto/tls"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSelfSignedRoundTripThroughFiles(t *testing.T) {
	c, err := SelfSigned("10.1.2.3")
	require.NoError(t, err)
	assert.Contains(t, c.Leaf.DNSNames, "localhost")
	assert.Len(t, c.Leaf.IPAddresses, 3)
	dir := t.TempDir()
	cf, kf := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	require.NoError(t, WritePEM(c, cf, kf))
	got, err := LoadKeyPair(cf, kf)
	require.NoError(t, err)
	assert.Equal(t, c.Certificate[0], got.Certificate[0])
	pool, err := CertPool(cf)
	require.NoError(t, err)
	_, err = c.Leaf.Verify(x509VerifyOpts(pool))
	assert.NoError(t, err)
	fp := Fingerprint(c.Certificate[0])
	assert.Len(t, strings.Split(fp, ":"), 32)

	_, err = CertPool(kf)
	assert.ErrorContains(t, err, "no PEM certificate")
	_, err = LoadKeyPair(cf, filepath.Join(dir, "missing"))
	assert.Error(t, err)
}

func TestClientAuth(t *testing.T) {
	tests := []struct {
		give string
		want tls.ClientAuthType
	}{{"", tls.NoClientCert}, {"none", tls.NoClientCert}, {"request", tls.VerifyClientCertIfGiven}, {"REQUIRE", tls.RequireAndVerifyClientCert}}
	for _, tt := range tests {
		got, err := ClientAuth(tt.give)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got)
	}
	_, err := ClientAuth("sometimes")
	assert.Error(t, err)
}
