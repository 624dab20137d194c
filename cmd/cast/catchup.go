package main

import (
	"crypto/tls"
	"flag"
	"os"
	"strings"

	"github.com/walcast/walcast/cast"
	"github.com/walcast/walcast/replay"
)

// replayFlags are `cast recv`'s TCP catch-up flags: with -replay the
// Consumer catches up from a replay server (the sender's WAL) before
// going live and whenever UDP cannot repair a gap, instead of stopping
// on the outcome.
type replayFlags struct {
	endpoints      string
	stream         uint
	ca, cert, key  string
	plaintext      bool
	tls            *tls.Config // set by check
	endpointsGiven []string
}

func (r *replayFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&r.endpoints, "replay", "", "catch up over TCP from these replay servers (HOST:PORT[,HOST:PORT…], tried in order: `cast send -replay`, `cast replay serve`): before going live from -from, and whenever UDP cannot repair a gap (faulted, reconnect), after which delivery goes on over UDP; empty: UDP only, an outcome ends the run")
	fs.UintVar(&r.stream, "stream", 1, "the stream id, as `cast send -stream` (default 1): what -replay catches up on, and the stream label of this process's counters (`cast stat`)")
	fs.StringVar(&r.ca, "ca", envOr("RSX_REPL_CA_PATH", "certs/ca.pem"), "with -replay: CA certificate(s) to trust (PEM)")
	fs.StringVar(&r.cert, "cert", envOr("RSX_REPL_CLIENT_CERT_PATH", "certs/client.pem"), "with -replay: client certificate for mutual TLS (PEM; used when it exists unless named)")
	fs.StringVar(&r.key, "key", envOr("RSX_REPL_CLIENT_KEY_PATH", "certs/client-key.pem"), "with -replay: client key for mutual TLS (PEM)")
	fs.BoolVar(&r.plaintext, "plaintext", false, "with -replay: connect without TLS (explicit opt-out)")
}

// check parses the endpoints and loads the TLS config.
func (r *replayFlags) check(fs *flag.FlagSet) error {
	for _, e := range strings.Split(r.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			r.endpointsGiven = append(r.endpointsGiven, e)
		}
	}
	if r.endpoints != "" && len(r.endpointsGiven) == 0 {
		return usagef("-replay: want at least one HOST:PORT")
	}
	if err := checkRange("stream", r.stream, 0, 1<<32-1); err != nil {
		return err
	}
	if len(r.endpointsGiven) == 0 || r.plaintext {
		return nil
	}
	t, err := clientTLS(fs, r.ca, r.cert, r.key)
	if err != nil {
		return err
	}
	r.tls = t
	return nil
}

// clientTLS loads a replay client's TLS config. A named certificate must
// load; the default one is used when `cast certs` wrote it here (servers
// require one by default).
func clientTLS(fs *flag.FlagSet, ca, cert, key string) (*tls.Config, error) {
	if !flagGiven(fs, "cert") && !flagGiven(fs, "key") {
		if _, err := os.Stat(cert); err != nil {
			cert, key = "", ""
		}
	}
	return replay.ClientTLS(ca, cert, key)
}

// catchUp sets the stream id of cc and turns TCP catch-up on when
// -replay names servers: the Consumer catches up from -from (unless -from
// now) before going live.
func (rf *recvFlags) catchUp(cc *cast.ConsumerConfig) {
	r := &rf.replay
	cc.Stream = uint32(r.stream)
	if len(r.endpointsGiven) == 0 {
		return
	}
	cc.NoCatchUp = false
	cc.Replay = r.endpointsGiven
	cc.TLS, cc.Plaintext = r.tls, r.plaintext
}

// serveFlags are a replay server's TLS flags (`cast replay serve`, `cast
// send -replay`).
type serveFlags struct {
	cert, key, clientCA  string
	anyClient, plaintext bool
}

func (s *serveFlags) add(fs *flag.FlagSet, prefix string) {
	fs.StringVar(&s.cert, "cert", envOr("RSX_REPL_CERT_PATH", "certs/server.pem"), prefix+"server certificate chain (PEM)")
	fs.StringVar(&s.key, "key", envOr("RSX_REPL_KEY_PATH", "certs/server-key.pem"), prefix+"server private key (PEM)")
	fs.StringVar(&s.clientCA, "client-ca", envOr("RSX_REPL_CLIENT_CA_PATH", "certs/ca.pem"), prefix+"serve only clients whose certificate this CA signed (PEM; `cast certs` writes certs/ca.pem and a client certificate)")
	fs.BoolVar(&s.anyClient, "any-client", false, prefix+"serve any TLS client, with or without a certificate (explicit opt-out of mutual TLS)")
	fs.BoolVar(&s.plaintext, "plaintext", false, prefix+"serve without TLS (explicit opt-out)")
}

// config sets the server's TLS (or Plaintext, AnyClient) in cfg and
// returns the mode in words.
func (s *serveFlags) config(cfg *replay.ServerConfig) (string, error) {
	if s.plaintext && s.anyClient {
		return "", usagef("-any-client is a TLS option; -plaintext serves without TLS")
	}
	cfg.Plaintext, cfg.AnyClient = s.plaintext, s.anyClient
	if s.plaintext {
		return "plaintext", nil
	}
	ca := s.clientCA
	mode := "TLS 1.3, clients with a certificate from " + ca
	if s.anyClient {
		ca, mode = "", "TLS 1.3, any client"
	} else if _, err := os.Stat(ca); err != nil {
		return "", usagef("mutual TLS needs the CA that signed the clients' certificates: -client-ca FILE (%v; `cast certs` writes certs/ca.pem), or -any-client to serve any TLS client", err)
	}
	t, err := replay.ServerTLS(s.cert, s.key, ca)
	if err != nil {
		return "", err
	}
	cfg.TLS = t
	return mode, nil
}
