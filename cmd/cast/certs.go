package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/walcast/walcast/replay"
)

func init() {
	register(command{name: "certs", summary: "make a self-signed dev CA with server and client certificates for replay TLS", run: runCerts})
}

func runCerts(args []string) error {
	fs := newFlagSet("certs", "[-dir DIR] [-hosts H1,H2] [-days N] [-force]",
		"Writes ca.pem, ca-key.pem, server.pem, server-key.pem, client.pem and client-key.pem\n"+
			"(ECDSA P-256) for `cast replay serve` and `cast replay tail`. For development and\n"+
			"tests only: the CA key sits next to the certificates.")
	dir := fs.String("dir", "certs", "directory to write into (created if missing)")
	hosts := fs.String("hosts", "localhost,127.0.0.1,::1", "comma-separated server names and IPs (the SANs)")
	days := fs.Int("days", 365, "validity in days")
	force := fs.Bool("force", false, "overwrite existing files")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkRange("days", *days, 1, 100*365); err != nil {
		return err
	}
	var hs []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			hs = append(hs, h)
		}
	}
	p, err := replay.NewDevPKI(hs, time.Duration(*days)*24*time.Hour)
	if err != nil {
		return err
	}
	if err := p.Write(*dir, *force); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote CA, server (%s) and client certificates to %s\n", strings.Join(hs, ", "), *dir)
	return nil
}
