// Package tlsconf holds what every TLS-capable transport needs: loading
// certificates and CA pools from files, and generating a self-signed
// development certificate with a printable fingerprint.
package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"strings"
	"time"
)

// SelfSigned generates a self-signed ECDSA P-256 certificate valid for a
// year for localhost, 127.0.0.1, ::1 and, when it is a specific name or
// address, host.
func SelfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: generate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "quiver self-signed", Organization: []string{"Quiver"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if host != "" && host != "localhost" {
		if ip := net.ParseIP(strings.Trim(host, "[]")); ip != nil {
			if !ip.IsUnspecified() && !ip.IsLoopback() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, host)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: create certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: parse certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// WritePEM writes cert and its key as PEM files (for tests and `mq dev`).
func WritePEM(cert tls.Certificate, certFile, keyFile string) error {
	var cb strings.Builder
	for _, der := range cert.Certificate {
		pem.Encode(&cb, &pem.Block{Type: "CERTIFICATE", Bytes: der}) //nolint:errcheck // writes to a strings.Builder, which cannot fail
	}
	if err := os.WriteFile(certFile, []byte(cb.String()), 0o644); err != nil {
		return fmt.Errorf("tlsconf: write %s: %w", certFile, err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		return fmt.Errorf("tlsconf: encode key: %w", err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		return fmt.Errorf("tlsconf: write %s: %w", keyFile, err)
	}
	return nil
}

// Fingerprint is the SHA-256 of a DER certificate as colon-separated hex,
// as `openssl x509 -fingerprint -sha256` prints it.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	h := strings.ToUpper(hex.EncodeToString(sum[:]))
	var b strings.Builder
	for i := 0; i < len(h); i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		b.WriteString(h[i : i+2])
	}
	return b.String()
}

// CertPool reads PEM certificates from file.
func CertPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: read %s: %w", file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tlsconf: %s: no PEM certificate found", file)
	}
	return pool, nil
}

// LoadKeyPair loads a certificate and its key.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("tlsconf: load certificate %s and key %s: %w", certFile, keyFile, err)
	}
	return c, nil
}

// ClientAuth maps a configuration word to tls.ClientAuthType: "none",
// "request" (ask, verify if given), "require" (must present a valid one).
func ClientAuth(s string) (tls.ClientAuthType, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "none":
		return tls.NoClientCert, nil
	case "request":
		return tls.VerifyClientCertIfGiven, nil
	case "require":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("tlsconf: client_auth %q is none of none, request, require", s)
}
