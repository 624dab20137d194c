package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/replay"
	"github.com/walcast/walcast/wal"
	"github.com/walcast/walcast/wire"
)

func init() {
	register(command{name: "replay", summary: "TCP catch-up from the WAL: `cast replay serve|tail`", run: runReplay})
}

// replayOut is where `cast replay tail` prints; tests swap it.
var replayOut io.Writer = os.Stdout

// replayContext is the lifetime of serve and tail (until SIGINT/SIGTERM);
// tests swap it.
var replayContext = signalContext

const replayUsage = `usage: cast replay serve -wal DIR [-listen ADDR] [-streams 1,2] [TLS flags]
       cast replay tail -endpoints A[,B...] [-stream N] [-from SEQ | -tip FILE] [-out FILE] [TLS flags]

serve follows the WAL directory (written by another process) and serves each
stream's history from any seq, then its live tail, over TLS 1.3 with mutual
authentication: only clients whose certificate the -client-ca CA signed are
served (-any-client serves any TLS client; -plaintext turns TLS off).
tail connects to the endpoints in order, catches up from SEQ (or the tip file),
then follows the live tail: one line per record (seq type len) on stdout, or
the raw frames appended to -out.

TLS files default to the environment: RSX_REPL_CERT_PATH, RSX_REPL_KEY_PATH,
RSX_REPL_CA_PATH (as the reference), RSX_REPL_CLIENT_CA_PATH,
RSX_REPL_CLIENT_CERT_PATH, RSX_REPL_CLIENT_KEY_PATH, then the files 'cast certs'
writes: ./certs/{server,server-key,ca,client,client-key}.pem. -plaintext turns
TLS off on both sides.`

func runReplay(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(os.Stderr, replayUsage)
		if len(args) == 0 {
			return usagef("want a subcommand: serve or tail")
		}
		return nil
	}
	switch args[0] {
	case "serve":
		return replayServe(args[1:])
	case "tail":
		return replayTail(args[1:])
	}
	fmt.Fprintln(os.Stderr, replayUsage)
	return usagef("unknown subcommand %q", args[0])
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func replayServe(args []string) error {
	fs := newFlagSet("replay serve", "-wal DIR [flags]", "Serve WAL streams over TCP (TLS 1.3 unless -plaintext).")
	walDir := fs.String("wal", "", "WAL root directory (the writer's Config.Dir)")
	listen := fs.String("listen", "127.0.0.1:7400", "TCP address to listen on")
	streams := fs.String("streams", "", "comma-separated stream ids (default: every stream under -wal)")
	var sf serveFlags
	sf.add(fs, "")
	maxConns := fs.Int("max-conns", replay.DefaultServerConfig().MaxConns, "serve at most this many connections at once (each holds at most 192 KiB of buffers plus TLS state, returned when it ends); more are closed at once")
	writeTimeout := fs.Duration("write-timeout", 5*time.Second, "drop a consumer whose connection stays full this long")
	poll := fs.Duration("poll", time.Second, "safety-net poll of the WAL directory (inotify wakes it otherwise)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *walDir == "" {
		return usagef("-wal DIR is required")
	}
	if err := checkRange("max-conns", *maxConns, 1, 1<<20); err != nil {
		return err
	}
	cfg := replay.DefaultServerConfig()
	cfg.WriteTimeout, cfg.MaxConns = *writeTimeout, *maxConns
	mode, err := sf.config(&cfg)
	if err != nil {
		return err
	}
	cfg.OnDisconnect = func(r replay.ConnReport) {
		fmt.Fprintf(os.Stderr, "%s stream %d from %d: sent %d records (last %d), ended: %v\n", r.Remote, r.Stream, r.From, r.Records, r.Last, r.Reason)
	}
	var ids []uint32
	if *streams == "" {
		found, err := wal.Streams(*walDir)
		if err != nil {
			return err
		}
		if len(found) == 0 {
			ents, _ := os.ReadDir(*walDir)
			for _, e := range ents {
				if id, err := strconv.ParseUint(e.Name(), 10, 32); err == nil && e.IsDir() {
					ids = append(ids, uint32(id))
				}
			}
		} else {
			ids = found
		}
	} else {
		for _, s := range strings.Split(*streams, ",") {
			id, err := strconv.ParseUint(strings.TrimSpace(s), 10, 32)
			if err != nil {
				return fmt.Errorf("bad stream id %q", s)
			}
			ids = append(ids, uint32(id))
		}
	}
	if len(ids) == 0 {
		return fmt.Errorf("no streams under %s", *walDir)
	}
	var srcs []replay.Source
	for _, id := range ids {
		ds, err := replay.OpenDirSource(*walDir, id, *poll)
		if err != nil {
			// One bad stream does not stop the others.
			fmt.Fprintf(os.Stderr, "cast replay serve: stream %d not served: %v\n", id, err)
			continue
		}
		defer ds.Close()
		if derr := ds.Err(); derr != nil {
			fmt.Fprintf(os.Stderr, "cast replay serve: stream %d is damaged: %v (served up to the damage; clients are told the seq)\n", id, derr)
		}
		srcs = append(srcs, ds)
	}
	if len(srcs) == 0 {
		return fmt.Errorf("no stream of %s can be served", *walDir)
	}
	srv, err := replay.NewServer(cfg, srcs...)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := replayContext()
	defer stop()
	go func() { <-ctx.Done(); srv.Close() }()
	fmt.Fprintf(os.Stderr, "serving streams %v from %s on %s (%s; at most %d connections)\n", ids, *walDir, ln.Addr(), mode, *maxConns)
	if err := srv.Serve(ln); !errors.Is(err, replay.ErrServerClosed) {
		return err
	}
	st := srv.Stats()
	fmt.Fprintf(os.Stderr, "served %d connections, %d records, %d bytes; %d not-available, %d ended at damage, %d slow consumers dropped, %d failed handshakes\n",
		st.Accepted, st.Records, st.Bytes, st.NotAvailable, st.Damaged, st.SlowConsumers, st.HandshakeFailed)
	// A server runs until stopped: Ctrl-C is how it ends, and says so.
	return interruptedf("served %d connections, %d records", st.Accepted, st.Records)
}

func replayTail(args []string) error {
	fs := newFlagSet("replay tail", "-endpoints A[,B...] [flags]", "Catch up from a seq over TCP, then follow the live tail. Without -follow it gives\n"+
		"up (exit 1, naming the last reason: connection error or the server's NotAvailable\n"+
		"answer) when no endpoint has served the stream for -wait. Exits 0 after -count\n"+
		"records or at CaughtUp with -caught-up, 130 on Ctrl-C.")
	endpoints := fs.String("endpoints", "127.0.0.1:7400", "comma-separated host:port, tried in order (federation on NotAvailable)")
	stream := fs.Uint("stream", 1, "stream id (`cast send -wal` writes stream 1 unless told otherwise)")
	from := fs.Uint64("from", 1, "first seq wanted (ignored when -tip names an existing tip file)")
	tipPath := fs.String("tip", "", "tip file: resume after its seq and keep it up to date")
	out := fs.String("out", "", "append raw frames to this file instead of printing")
	count := fs.Uint64("count", 0, "stop after this many records (0: follow forever)")
	untilCaught := fs.Bool("caught-up", false, "stop at the server's CaughtUp")
	wait := fs.Duration("wait", 10*time.Second, "give up when no endpoint has served the stream for this long")
	follow := fs.Bool("follow", false, "never give up: retry the endpoints forever")
	ca := fs.String("ca", envOr("RSX_REPL_CA_PATH", "certs/ca.pem"), "CA certificate(s) to trust (PEM)")
	cert := fs.String("cert", envOr("RSX_REPL_CLIENT_CERT_PATH", "certs/client.pem"), "client certificate for mutual TLS (PEM; `cast certs` writes it; the default is used when it exists)")
	key := fs.String("key", envOr("RSX_REPL_CLIENT_KEY_PATH", "certs/client-key.pem"), "client key for mutual TLS (PEM)")
	plaintext := fs.Bool("plaintext", false, "connect without TLS (explicit opt-out)")
	verbose := fs.Bool("v", false, "print every connection event to stderr (without it: each new error or NotAvailable reason once)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *from == 0 {
		return usagef("-from 0: seqs start at 1")
	}
	if err := checkRange("stream", *stream, 0, 1<<32-1); err != nil {
		return err
	}
	if err := checkRange("wait", *wait, time.Millisecond, 365*24*time.Hour); err != nil {
		return err
	}
	cfg := replay.DefaultClientConfig()
	for _, e := range strings.Split(*endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			cfg.Endpoints = append(cfg.Endpoints, e)
		}
	}
	if len(cfg.Endpoints) == 0 {
		return usagef("-endpoints: want at least one HOST:PORT")
	}
	cfg.Stream = uint32(*stream)
	cfg.StartTip = *from - 1
	cfg.Plaintext = *plaintext
	if *follow {
		cfg.RetryBudget = math.MaxInt32
	}
	if *tipPath != "" {
		abs, err := filepath.Abs(*tipPath)
		if err != nil {
			return err
		}
		if _, err := os.Stat(abs); err == nil {
			cfg.TipPath = abs
		} else if err := replay.WriteTip(abs, *from-1); err != nil {
			return err
		} else {
			cfg.TipPath = abs
		}
	}
	if !*plaintext {
		t, err := clientTLS(fs, *ca, *cert, *key)
		if err != nil {
			return err
		}
		cfg.TLS = t
	}
	w := &tailWatch{verbose: *verbose, since: time.Now()}
	cfg.OnEvent = w.event
	cl, err := replay.NewClient(cfg)
	if err != nil {
		return err
	}
	var sink *bufio.Writer
	if *out != "" {
		f, err := os.OpenFile(*out, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		sink = bufio.NewWriterSize(f, 256<<10)
	} else {
		sink = bufio.NewWriter(replayOut)
	}
	defer sink.Flush()
	w.flush = sink.Flush
	var n uint64
	var hdr [wire.HeaderSize]byte
	h := func(hd wire.Header, p []byte) error {
		w.served()
		if hd.Type == wire.TypeSkip {
			if sk, err := wire.ParseSkip(p); err == nil {
				fmt.Fprintf(os.Stderr, "skip: seqs %d…%d have no record in the log (%s)\n", sk.From, sk.Seq, skipReason(sk.Reason))
			}
		}
		if *out != "" {
			hd.Put(hdr[:])
			sink.Write(hdr[:])
			sink.Write(p)
		} else {
			fmt.Fprintf(sink, "%d %d %d\n", wire.Seq(p), hd.Type, hd.Len)
		}
		n++
		if w.live.Load() {
			if err := sink.Flush(); err != nil {
				return err
			}
		}
		if *count > 0 && n >= *count {
			return replay.ErrStop
		}
		return nil
	}
	sctx, stop := replayContext()
	defer stop()
	ctx, giveUp := context.WithCancelCause(sctx)
	defer giveUp(nil)
	if !*follow {
		go w.watchdog(ctx, *wait, giveUp)
	}
	if *untilCaught {
		_, err = cl.CatchUp(ctx, h)
	} else {
		err = cl.Run(ctx, h)
	}
	if ferr := sink.Flush(); err == nil {
		err = ferr
	}
	fmt.Fprintf(os.Stderr, "%d records, tip %d\n", n, cl.Tip())
	switch {
	case sctx.Err() != nil:
		return interruptedf("%d records, tip %d", n, cl.Tip())
	case errors.Is(context.Cause(ctx), errTailGaveUp):
		return failf("%v", context.Cause(ctx))
	case errors.Is(err, context.Canceled):
		return nil
	case err != nil:
		return failf("stream %d: %v", *stream, err)
	}
	return nil
}

var errTailGaveUp = errors.New("gave up")

// tailWatch follows a replay client's events: it prints them (all with
// -v; otherwise each new failure or NotAvailable reason once) and tells
// whether an endpoint is serving the stream, for the -wait watchdog.
type tailWatch struct {
	verbose bool
	live    atomic.Bool // after CaughtUp: flush each record
	flush   func() error
	mu      sync.Mutex
	serving bool
	since   time.Time // when serving last changed
	reason  string    // the last failure, printed
}

func (w *tailWatch) served() {
	w.mu.Lock()
	if !w.serving {
		w.serving, w.since = true, time.Now()
	}
	w.mu.Unlock()
}

func (w *tailWatch) event(e replay.Event) {
	if e.Kind == replay.EventCaughtUp {
		w.live.Store(true)
		w.served()
		if w.flush != nil {
			w.flush() // the history is out: show it (same goroutine as the handler)
		}
	}
	if w.verbose {
		fmt.Fprintf(os.Stderr, "%v %s tip=%d", e.Kind, e.Endpoint, e.Tip)
		if e.Err != nil {
			fmt.Fprintf(os.Stderr, " err=%v", e.Err)
		}
		if e.Delay > 0 {
			fmt.Fprintf(os.Stderr, " delay=%v", e.Delay.Round(time.Millisecond))
		}
		fmt.Fprintln(os.Stderr)
	}
	var why string
	switch e.Kind {
	case replay.EventNotAvailable:
		na := e.NotAvailable
		if na.Oldest == 0 && na.Highest == 0 {
			why = fmt.Sprintf("%s holds nothing of stream %d (not available)", e.Endpoint, na.Stream)
		} else {
			why = fmt.Sprintf("%s holds seqs %d..%d of stream %d, not %d (not available)", e.Endpoint, na.Oldest, na.Highest, na.Stream, na.Requested)
		}
	case replay.EventConnectFailed, replay.EventDisconnected:
		if e.Err != nil {
			why = fmt.Sprintf("%s: %v", e.Endpoint, e.Err)
		}
	default:
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.serving {
		w.serving, w.since = false, time.Now()
	}
	if why != "" && why != w.reason {
		w.reason = why
		if !w.verbose {
			fmt.Fprintln(os.Stderr, why)
		}
	}
}

// watchdog gives up once nothing has served the stream for wait.
func (w *tailWatch) watchdog(ctx context.Context, wait time.Duration, giveUp context.CancelCauseFunc) {
	t := time.NewTicker(min(wait/10, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w.mu.Lock()
		idle := !w.serving && time.Since(w.since) > wait
		why := w.reason
		w.mu.Unlock()
		if idle {
			if why == "" {
				why = "no answer"
			}
			giveUp(fmt.Errorf("%w after %v without an endpoint serving the stream (-wait; -follow retries forever): %s", errTailGaveUp, wait, why))
			return
		}
	}
}
