package quictransport

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"strings"
	"time"
)

// ALPN is the application protocol both ends negotiate.
const ALPN = "quiver-remoting"

// serverTLS builds the listener's TLS configuration: the configured
// certificate, or a generated self-signed one when none is configured.
// host is the listen host, added to the generated certificate's names.
func serverTLS(cfg *Config, host string, log *slog.Logger) (*tls.Config, error) {
	var cert tls.Certificate
	if cfg.CertFile != "" || cfg.KeyFile != "" {
		var err error
		cert, err = tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("quictransport: load certificate %s and key %s: %w", cfg.CertFile, cfg.KeyFile, err)
		}
	} else {
		var err error
		cert, err = SelfSigned(host)
		if err != nil {
			return nil, err
		}
		leaf := cert.Leaf
		log.Warn("no cert_file/key_file configured: serving QUIC with a generated self-signed certificate; clients need insecure_skip_verify or ca_file",
			"sha256", Fingerprint(leaf.Raw), "dns", leaf.DNSNames, "ips", leaf.IPAddresses, "not_after", leaf.NotAfter.Format(time.RFC3339))
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{ALPN},
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// clientTLS builds a dialler's TLS configuration for a server at host.
func clientTLS(cfg *Config, host string) (*tls.Config, error) {
	tc := &tls.Config{
		NextProtos: []string{ALPN},
		MinVersion: tls.VersionTLS13,
		ServerName: cfg.ServerName,
	}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	switch {
	case cfg.CAFile != "":
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("quictransport: read ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("quictransport: ca_file %s: no PEM certificate found", cfg.CAFile)
		}
		tc.RootCAs = pool
	case cfg.InsecureSkipVerify:
		tc.InsecureSkipVerify = true
	}
	return tc, nil
}

// SelfSigned generates a self-signed ECDSA P-256 certificate valid for a
// year for localhost, 127.0.0.1, ::1 and, when it is a specific name or
// address, host.
func SelfSigned(host string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("quictransport: generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("quictransport: generate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "quiver self-signed", Organization: []string{"Quiver"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
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
		return tls.Certificate{}, fmt.Errorf("quictransport: create certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("quictransport: parse certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
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
