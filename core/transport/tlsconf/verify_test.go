package tlsconf

import "crypto/x509"

func x509VerifyOpts(pool *x509.CertPool) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: pool, DNSName: "localhost"}
}
