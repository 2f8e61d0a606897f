// Package tlsconftest issues certificates for tests: a CA and the
// certificates it signs, written as PEM files.
package tlsconftest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// CA is a test certificate authority, valid for an hour either side of
// its creation.
type CA struct {
	// File is the CA's certificate (PEM).
	File string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
	next atomic.Int64
}

// Leaf is a certificate a CA signed, as files.
type Leaf struct {
	CertFile, KeyFile string
}

// NewCA creates a CA named name in a temporary directory of t.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlsconftest: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("tlsconftest: create CA: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("tlsconftest: parse CA: %v", err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.File = filepath.Join(ca.dir, "ca.pem")
	if err := os.WriteFile(ca.File, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatalf("tlsconftest: %v", err)
	}
	ca.next.Store(1)
	return ca
}

// Issue signs a certificate for name (its common name), usable as server
// and as client, valid for hosts (IPs or DNS names).
func (ca *CA) Issue(t testing.TB, name string, hosts ...string) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("tlsconftest: key: %v", err)
	}
	serial := ca.next.Add(1)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("tlsconftest: sign %s: %v", name, err)
	}
	l := Leaf{
		CertFile: filepath.Join(ca.dir, fmt.Sprintf("%d-cert.pem", serial)),
		KeyFile:  filepath.Join(ca.dir, fmt.Sprintf("%d-key.pem", serial)),
	}
	if err := tlsconf.WritePEM(tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, l.CertFile, l.KeyFile); err != nil {
		t.Fatalf("tlsconftest: %v", err)
	}
	return l
}

// InstallAt writes l's certificate and key over certFile and keyFile (as
// a rotation in place does) and returns them as a Leaf.
func (l Leaf) InstallAt(t testing.TB, certFile, keyFile string) Leaf {
	t.Helper()
	for src, dst := range map[string]string{l.CertFile: certFile, l.KeyFile: keyFile} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatalf("tlsconftest: %v", err)
		}
		if err := os.WriteFile(dst, b, 0o600); err != nil {
			t.Fatalf("tlsconftest: %v", err)
		}
	}
	return Leaf{CertFile: certFile, KeyFile: keyFile}
}
