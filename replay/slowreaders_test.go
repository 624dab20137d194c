package replay

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"

	"github.com/walcast/walcast/wire"
)

// slowReaders is the child process of BenchmarkSlowReaders: it opens n
// TLS connections to addr, requests stream 1 from seq 1 on each, reads
// nothing, says "ready" and waits for its stdin to close.
func slowReaders(addr string, n int, dir string) {
	cfg, err := ClientTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem"))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	cfg.ServerName = "127.0.0.1"
	var conns []*tls.Conn
	for i := 0; i < n; i++ {
		c, err := tls.Dial("tcp", addr, cfg)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		var req [wire.ControlFrameSize]byte
		wire.PutReplicationRequestFrame(req[:], wire.ReplicationRequest{From: 1, Stream: 1})
		if _, err := c.Write(req[:]); err != nil {
			fmt.Println("error:", err)
			os.Exit(3)
		}
		conns = append(conns, c)
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	for _, c := range conns {
		c.Close()
	}
}
