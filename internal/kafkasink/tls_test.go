package kafkasink

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePEM writes a self-signed certificate and its key as PEM files.
func writePEM(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "rttscope test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestTLSConfig reads the CA and the client certificate; a CA file without
// a certificate and a missing key are refused with the key's name.
func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writePEM(t, dir)
	o, err := ParseSpec("brokers=h:9093,topic=t,tls-ca=" + cert + ",tls-cert=" + cert + ",tls-key=" + key + ",tls-server-name=kafka1")
	if err != nil {
		t.Fatal(err)
	}
	c, err := o.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if c.RootCAs == nil || len(c.Certificates) != 1 || c.ServerName != "kafka1" {
		t.Fatalf("tls config %+v", c)
	}
	o.TLSCA = key // no certificate in it
	if _, err := o.tlsConfig(); err == nil || !strings.Contains(err.Error(), "tls-ca: no PEM certificate") {
		t.Errorf("key as CA: %v", err)
	}
	o.TLSCA, o.TLSKey = cert, filepath.Join(dir, "missing")
	if _, err := o.tlsConfig(); err == nil || !strings.Contains(err.Error(), "tls-cert/tls-key") {
		t.Errorf("missing key: %v", err)
	}
}
