package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
)

// tlsListener serves TLS on ln with the certificate chain and key of the
// two PEM files. HTTP/1.1 only: a parked claimWork call takes its
// connection over (internal/api), which HTTP/2's multiplexed streams do
// not allow. The files are read once; restart hopper to renew them.
func tlsListener(ln net.Listener, certFile, keyFile string) (net.Listener, error) {
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together: give both PEM files, or neither to serve plain HTTP")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate: %w", err)
	}
	return tls.NewListener(ln, &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}), nil
}
