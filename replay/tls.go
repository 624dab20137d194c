package replay

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
	"time"
)

// ServerTLS loads a server's certificate chain and private key from PEM
// files. When clientCAFile is not empty, clients must present a
// certificate signed by one of its CAs (mutual TLS). The config allows
// TLS 1.3 only.
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("replay: load server key pair: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if clientCAFile != "" {
		pool, err := loadPool(clientCAFile)
		if err != nil {
			return nil, err
		}
		c.ClientCAs = pool
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ClientTLS trusts only the CA certificates in caFile. When certFile and
// keyFile are not empty the client presents that certificate (mutual
// TLS). The server name checked is the endpoint's host (set per dial by
// the Client unless ServerName is set here). TLS 1.3 only.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := loadPool(caFile)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}
	if certFile != "" || keyFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("replay: load client key pair: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

func loadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("replay: read CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("replay: %s holds no PEM certificate: %w", file, ErrConfig)
	}
	return pool, nil
}

// DevPKI is a throwaway certificate authority with one server and one
// client certificate, for development and tests. Keys are ECDSA P-256.
// Never use it in production: the CA key is kept next to the certs.
type DevPKI struct {
	CACert, CAKey         []byte // PEM
	ServerCert, ServerKey []byte // PEM; SANs are the hosts given
	ClientCert, ClientKey []byte // PEM; CN "walcast-client"
}

// NewDevPKI makes a CA and server/client certificates valid for validity
// (0 means one year). hosts are the server's SANs: IP literals become IP
// SANs, other names DNS SANs; empty means "localhost", 127.0.0.1 and ::1.
func NewDevPKI(hosts []string, validity time.Duration) (*DevPKI, error) {
	if validity <= 0 {
		validity = 365 * 24 * time.Hour
	}
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	now := time.Now().Add(-time.Hour) // tolerate clock skew between hosts
	end := time.Now().Add(validity)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("replay: CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "walcast dev CA"},
		NotBefore:             now,
		NotAfter:              end,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("replay: CA cert: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("replay: CA cert: %w", err)
	}
	p := &DevPKI{CACert: pemBlock("CERTIFICATE", caDER)}
	if p.CAKey, err = keyPEM(caKey); err != nil {
		return nil, err
	}
	leaf := func(cn string, usage x509.ExtKeyUsage, sans []string) (certPEM, kPEM []byte, err error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, fmt.Errorf("replay: %s key: %w", cn, err)
		}
		t := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now,
			NotAfter:     end,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		for _, h := range sans {
			if ip := net.ParseIP(h); ip != nil {
				t.IPAddresses = append(t.IPAddresses, ip)
			} else {
				t.DNSNames = append(t.DNSNames, h)
			}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &k.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("replay: %s cert: %w", cn, err)
		}
		kp, err := keyPEM(k)
		return pemBlock("CERTIFICATE", der), kp, err
	}
	if p.ServerCert, p.ServerKey, err = leaf("walcast-server", x509.ExtKeyUsageServerAuth, hosts); err != nil {
		return nil, err
	}
	if p.ClientCert, p.ClientKey, err = leaf("walcast-client", x509.ExtKeyUsageClientAuth, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// ServerTLS returns a TLS 1.3 server config using the server certificate.
// With mutual set, clients must present a certificate signed by the CA.
func (p *DevPKI) ServerTLS(mutual bool) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.ServerCert, p.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("replay: server key pair: %w", err)
	}
	c := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}
	if mutual {
		c.ClientCAs = x509.NewCertPool()
		c.ClientCAs.AppendCertsFromPEM(p.CACert)
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return c, nil
}

// ClientTLS returns a TLS 1.3 client config that trusts only the CA and
// presents the client certificate.
func (p *DevPKI) ClientTLS() (*tls.Config, error) {
	cert, err := tls.X509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		return nil, fmt.Errorf("replay: client key pair: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CACert)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}

// Write stores the PKI in dir as ca.pem, ca-key.pem, server.pem,
// server-key.pem, client.pem and client-key.pem (keys mode 0600). It
// creates dir if needed and refuses to overwrite existing files unless
// overwrite is set.
func (p *DevPKI) Write(dir string, overwrite bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"ca.pem", p.CACert, 0o644}, {"ca-key.pem", p.CAKey, 0o600},
		{"server.pem", p.ServerCert, 0o644}, {"server-key.pem", p.ServerKey, 0o600},
		{"client.pem", p.ClientCert, 0o644}, {"client-key.pem", p.ClientKey, 0o600},
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if !overwrite {
		flags = os.O_WRONLY | os.O_CREATE | os.O_EXCL
	}
	for _, f := range files {
		fh, err := os.OpenFile(filepath.Join(dir, f.name), flags, f.mode)
		if err != nil {
			return fmt.Errorf("replay: write certs: %w", err)
		}
		_, werr := fh.Write(f.data)
		cerr := fh.Close()
		if werr != nil || cerr != nil {
			return fmt.Errorf("replay: write %s: %w", f.name, errorsJoin(werr, cerr))
		}
	}
	return nil
}

func errorsJoin(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func keyPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("replay: marshal key: %w", err)
	}
	return pemBlock("PRIVATE KEY", der), nil
}
