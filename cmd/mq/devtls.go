package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/quivermq/quiver/core/config"
	"github.com/quivermq/quiver/core/kernel"
	"github.com/quivermq/quiver/core/transport/tlsconf"
)

// setupDevTLS turns TLS on for TCP with a development certificate kept in
// <storage.dir>/tls (generated on first use), trusted by the process's own
// dialers (the broker registering with its name server). It sets the
// keys in cfg before cfg is planned (each run of the process plans it).
func setupDevTLS(cfg *config.Config, log io.Writer) error {
	storageDir := cfg.String("storage.dir")
	if storageDir == "" {
		storageDir = kernel.DefaultStorageConfig().Dir
	}
	dir, err := filepath.Abs(filepath.Join(storageDir, "tls"))
	if err != nil {
		return fmt.Errorf("dev tls: %w", err)
	}
	certFile, keyFile := filepath.Join(dir, "dev-cert.pem"), filepath.Join(dir, "dev-key.pem")
	if _, err := os.Stat(certFile); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("dev tls: %w", err)
		}
		cert, err := tlsconf.SelfSigned("")
		if err != nil {
			return fmt.Errorf("dev tls: %w", err)
		}
		if err := tlsconf.WritePEM(cert, certFile, keyFile); err != nil {
			return fmt.Errorf("dev tls: %w", err)
		}
	}
	cert, err := tlsconf.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("dev tls: %w", err)
	}
	fmt.Fprintf(log, "TLS on: development certificate %s (sha256 %s); clients trust it with ca_file or skip verification\n",
		certFile, tlsconf.Fingerprint(cert.Certificate[0]))
	cfg.Set("transport.tcp.tls.enabled", true)
	cfg.Set("transport.tcp.tls.cert_file", certFile)
	cfg.Set("transport.tcp.tls.key_file", keyFile)
	if !cfg.Exists("transport.tcp.tls.ca_file") {
		cfg.Set("transport.tcp.tls.ca_file", certFile)
	}
	// QUIC always runs TLS: give it the same certificate, so quic://
	// clients can trust one file — where QUIC is enabled (the plan refuses
	// keys of a transport that is not).
	if !slices.Contains(cfg.Strings("transports"), "quic") {
		return nil
	}
	if !cfg.Exists("transport.quic.cert_file") {
		cfg.Set("transport.quic.cert_file", certFile)
		cfg.Set("transport.quic.key_file", keyFile)
	}
	if !cfg.Exists("transport.quic.ca_file") && !cfg.Exists("transport.quic.insecure_skip_verify") {
		cfg.Set("transport.quic.ca_file", certFile)
	}
	return nil
}
