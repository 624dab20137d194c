package benchkit

// BenchmarkRTTTrace (run it under the bench lock):
//
//	WALCAST_RTTTRACE_RUNS=6 WALCAST_RTTTRACE_QUIET=1 \
//	  go test -run '^$' -bench RTTTrace -v ./internal/benchkit
//
// timestamps every sendto/recvfrom of the spin RTT rows through the
// batch.Sys seam (two clock reads per call, in every row alike) and
// splits each round trip into its segments: each side's sendto, the time
// from a sendto's return to the peer's recvfrom return (pickup), and each
// side's turnaround from recvfrom return to its next sendto. Rows:
// floor-seam (RTTFloor's loop over the seam), floor-dpsock (the same on
// datapath/udp's sockets: their options), raw-udp and casting-udp; the
// last table is the median over runs of each segment's median.

import (
	"encoding/binary"
	"fmt"
	"github.com/walcast/walcast/datapath/udp"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/walcast/walcast/batch"
)

var trEpoch = time.Now()

func trNow() int64 { return int64(time.Since(trEpoch)) }

type trEv struct {
	key          uint64
	t0, t1, prev int64 // prev: entry of the poll before (recv)
}

type trLog struct {
	sends, recvs        []trEv
	otherSends          uint64
	otherRecvs          uint64
	polls, eagain       uint64
	lastEntry, lastExit int64
	eagainNs            int64 // time inside EAGAIN recvfroms
	gapNs               int64 // time between an EAGAIN poll's exit and the next poll's entry
	gaps                uint64
	firstSend           int64
	gapv                []int64
	size, keyOff        int
}

var trFD [4096]*trLog
var trSize, trKeyOff int
var trOn bool

func trGet(fd int) *trLog {
	if !trOn || fd >= len(trFD) {
		return nil
	}
	lg := trFD[fd]
	if lg == nil {
		lg = &trLog{sends: make([]trEv, 0, 400000), recvs: make([]trEv, 0, 400000), gapv: make([]int64, 0, 1<<20), size: trSize, keyOff: trKeyOff, firstSend: -1}
		trFD[fd] = lg
	}
	return lg
}

func trInstall() func() {
	orig := batch.Sys
	batch.Sys.Sendto = func(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen uint32) (int, unix.Errno) {
		lg := trGet(fd)
		t0 := trNow()
		n, e := orig.Sendto(fd, p, flags, sa, salen)
		if lg != nil {
			t1 := trNow()
			if len(p) == lg.size {
				if lg.firstSend < 0 {
					lg.firstSend = t0
				}
				lg.sends = append(lg.sends, trEv{key: binary.LittleEndian.Uint64(p[lg.keyOff:]), t0: t0, t1: t1})
			} else {
				lg.otherSends++
			}
		}
		return n, e
	}
	batch.Sys.Recvfrom = func(fd int, p []byte, flags int, sa *unix.RawSockaddrInet6, salen *uint32) (int, unix.Errno) {
		lg := trGet(fd)
		t0 := trNow()
		n, e := orig.Recvfrom(fd, p, flags, sa, salen)
		if lg != nil {
			t1 := trNow()
			lg.polls++
			if lg.lastExit != 0 {
				lg.gapNs += t0 - lg.lastExit
				lg.gaps++
				if len(lg.gapv) < cap(lg.gapv) {
					lg.gapv = append(lg.gapv, t0-lg.lastExit)
				}
			}
			switch {
			case e == unix.EAGAIN:
				lg.eagain++
				lg.eagainNs += t1 - t0
				lg.lastExit = t1
			case e == 0 && n == lg.size:
				lg.recvs = append(lg.recvs, trEv{key: binary.LittleEndian.Uint64(p[lg.keyOff:]), t0: t0, t1: t1, prev: lg.lastEntry})
				lg.lastExit = 0
			default:
				lg.otherRecvs++
				lg.lastExit = 0
			}
			lg.lastEntry = t0
		}
		return n, e
	}
	return func() { batch.Sys = orig }
}

func trReset(size, keyOff int) {
	for i := range trFD {
		trFD[i] = nil
	}
	trSize, trKeyOff = size, keyOff
}

func med(v []int64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return float64(s[len(s)/2])
}

func mean(v []int64) float64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return float64(t) / float64(max(len(v), 1))
}

// trAnalyze joins the client's and the echo's events by key.
func trAnalyze(t testing.TB, name string, warm uint64, rtt Summary) (string, []float64) {
	var logs []*trLog
	for _, lg := range trFD {
		if lg != nil && len(lg.sends) > 0 {
			logs = append(logs, lg)
		}
	}
	if len(logs) != 2 {
		t.Fatalf("%s: %d fds with sends", name, len(logs))
	}
	cli, echo := logs[0], logs[1]
	if echo.firstSend < cli.firstSend {
		cli, echo = echo, cli
	}
	idx := func(evs []trEv) map[uint64]trEv {
		m := make(map[uint64]trEv, len(evs))
		for _, e := range evs {
			if _, ok := m[e.key]; !ok {
				m[e.key] = e
			}
		}
		return m
	}
	cs, er, es, cr := idx(cli.sends), idx(echo.recvs), idx(echo.sends), idx(cli.recvs)
	var s1, s2w, s2r, s2, s3, s4, s5w, s5r, s5, s6, cyc, ePoll, cPoll []int64
	for k := warm; ; k++ {
		a, ok1 := cs[k]
		b, ok2 := er[k]
		c, ok3 := es[k]
		d, ok4 := cr[k]
		n, ok5 := cs[k+1]
		if !(ok1 && ok2 && ok3 && ok4 && ok5) {
			break
		}
		s1 = append(s1, a.t1-a.t0)
		s2w = append(s2w, b.t0-a.t1)
		s2r = append(s2r, b.t1-b.t0)
		s2 = append(s2, b.t1-a.t1)
		s3 = append(s3, c.t0-b.t1)
		s4 = append(s4, c.t1-c.t0)
		s5w = append(s5w, d.t0-c.t1)
		s5r = append(s5r, d.t1-d.t0)
		s5 = append(s5, d.t1-c.t1)
		s6 = append(s6, n.t0-d.t1)
		cyc = append(cyc, n.t0-a.t0)
		ePoll = append(ePoll, b.t0-b.prev)
		cPoll = append(cPoll, d.t0-d.prev)
	}
	var sb strings.Builder
	var meds []float64
	fmt.Fprintf(&sb, "== %s: %d round trips joined; RTT p50 %.0f ns (row's own samples)\n", name, len(cyc), float64(rtt.P50))
	row := func(what string, v []int64) {
		meds = append(meds, med(v))
		fmt.Fprintf(&sb, "  %-52s median %7.0f  mean %7.0f\n", what, med(v), mean(v))
	}
	row("S1 client sendto (syscall)", s1)
	row("S2 client sendto exit -> echo recvfrom exit", s2)
	row("   S2a  .. -> echo successful recvfrom entry", s2w)
	row("   S2b  echo successful recvfrom", s2r)
	row("S3 echo turnaround: recvfrom exit -> sendto entry", s3)
	row("S4 echo sendto (syscall)", s4)
	row("S5 echo sendto exit -> client recvfrom exit", s5)
	row("   S5a  .. -> client successful recvfrom entry", s5w)
	row("   S5b  client successful recvfrom", s5r)
	row("S6 client turnaround: recvfrom exit -> next sendto", s6)
	row("cycle: sendto entry -> next sendto entry", cyc)
	row("echo poll period before the hit (entry->entry)", ePoll)
	row("client poll period before the hit", cPoll)
	for _, x := range []struct {
		n  string
		lg *trLog
	}{{"client", cli}, {"echo", echo}} {
		lg := x.lg
		fmt.Fprintf(&sb, "  %s: %d polls (%d EAGAIN), EAGAIN recvfrom mean %.0f ns, user time between polls mean %.0f median %.0f ns, other sends %d, other recvs %d, data sends %d\n",
			x.n, lg.polls, lg.eagain, float64(lg.eagainNs)/float64(max(lg.eagain, 1)), float64(lg.gapNs)/float64(max(lg.gaps, 1)), med(lg.gapv), lg.otherSends, lg.otherRecvs, len(lg.sends))
		meds = append(meds, med(lg.gapv))
	}
	meds = append(meds, float64(rtt.P50))
	return sb.String(), meds
}

var trNames = []string{"S1 client sendto", "S2 pickup by echo", "  S2a", "  S2b", "S3 echo turnaround", "S4 echo sendto", "S5 pickup by client", "  S5a", "  S5b", "S6 client turnaround", "cycle", "echo poll period", "client poll period", "client user gap between polls", "echo user gap between polls", "row RTT p50"}

// trFloor is RTTFloor's spin loop over the batch.Sys seam (RawSyscall6).
func trFloor(c RTTConfig) (Row, error) {
	cli, srv, err := floorUDPPair(true)
	if err != nil {
		return Row{}, err
	}
	defer unix.Close(cli)
	defer unix.Close(srv)
	return trFloorOn(c, cli, srv)
}

func udpFD(p *udp.Path) int {
	return int(reflect.ValueOf(p).Elem().FieldByName("s").Elem().FieldByName("FD").Int())
}

// trFloorDP is trFloor on datapath/udp's sockets (ConnectedUDP).
func trFloorDP(c RTTConfig) (Row, error) {
	a, b, err := ConnectedUDP()
	if err != nil {
		return Row{}, err
	}
	defer a.Close()
	defer b.Close()
	return trFloorOn(c, udpFD(a), udpFD(b))
}

func trFloorOn(c RTTConfig, cli, srv int) (Row, error) {
	var stop = make(chan struct{})
	stopped := false
	echoDone, err := floorThread(c.CPUs[1], func() {
		buf := make([]byte, 2048)
		for k := 0; ; k++ {
			n, e := batch.Sys.Recvfrom(srv, buf, 0, nil, nil)
			if e == unix.EAGAIN {
				if k&1023 == 0 {
					select {
					case <-stop:
						return
					default:
					}
				}
				continue
			}
			for {
				if _, e := batch.Sys.Sendto(srv, buf[:n], 0, nil, 0); e != unix.EAGAIN {
					break
				}
			}
		}
	})
	if err != nil {
		return Row{}, err
	}
	defer func() {
		if !stopped {
			close(stop)
		}
		<-echoDone
	}()
	s := NewSamples(c.N)
	cliDone, err := floorThread(c.CPUs[0], func() {
		out := make([]byte, c.Size)
		in := make([]byte, 2048)
		for i := 0; i < c.Warmup+c.N; i++ {
			binary.LittleEndian.PutUint64(out, uint64(i))
			t0 := time.Now()
			batch.Sys.Sendto(cli, out, 0, nil, 0)
			for {
				n, e := batch.Sys.Recvfrom(cli, in, 0, nil, nil)
				if e == 0 && n >= 8 && binary.LittleEndian.Uint64(in) == uint64(i) {
					if i >= c.Warmup {
						s.Record(int64(time.Since(t0)))
					}
					break
				}
			}
		}
	})
	if err != nil {
		return Row{}, err
	}
	<-cliDone
	close(stop)
	stopped = true
	return Row{Name: "floor-seam", Latency: s.Summarize()}, nil
}

// BenchmarkRTTTrace is a measurement, run once whatever b.N (it takes
// seconds): go test -run '^$' -bench RTTTrace -v ./internal/benchkit
// (WALCAST_RTTTRACE_RUNS, _N and _QUIET tune it).
func BenchmarkRTTTrace(t *testing.B) {
	c := DefaultRTTConfig()
	c.N, c.Warmup = 30000, 3000
	if os.Getenv("WALCAST_RTTTRACE_N") != "" {
		fmt.Sscan(os.Getenv("WALCAST_RTTTRACE_N"), &c.N)
	}
	runs := 2
	if os.Getenv("WALCAST_RTTTRACE_RUNS") != "" {
		fmt.Sscan(os.Getenv("WALCAST_RTTTRACE_RUNS"), &runs)
	}
	undo := trInstall()
	defer undo()
	all := map[string][][]float64{}
	rows := []string{"floor-seam", "floor-dpsock", "raw-udp", "casting-udp"}
	defer func() {
		var sb strings.Builder
		fmt.Fprintf(&sb, "median over %d runs of each segment's median (ns):\n%-32s", runs, "")
		for _, r := range rows {
			fmt.Fprintf(&sb, "%14s", r)
		}
		fmt.Fprintf(&sb, "%14s\n", "cast-floor")
		for i, n := range trNames {
			fmt.Fprintf(&sb, "%-32s", n)
			var v [4]float64
			for j, r := range rows {
				var xs []int64
				for _, m := range all[r] {
					xs = append(xs, int64(m[i]))
				}
				v[j] = med(xs)
				fmt.Fprintf(&sb, "%14.0f", v[j])
			}
			fmt.Fprintf(&sb, "%14.0f\n", v[3]-v[0])
		}
		t.Log(sb.String())
	}()
	for r := 0; r < runs; r++ {
		// Uninstrumented floor for reference.
		trOn = false
		fr, err := RTTFloor(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("run %d: floor-loop (uninstrumented, Syscall6) p50 %d ns", r, fr.Latency.P50)
		for _, x := range []struct {
			name   string
			keyOff int
			fn     func(RTTConfig) (Row, error)
		}{
			{"floor-seam", 0, trFloor},
			{"floor-dpsock", 0, trFloorDP},
			{"raw-udp", 0, RTTRawUDP},
			{"casting-udp", 24, RTTCasting},
		} {
			trReset(c.Size, x.keyOff)
			trOn = true
			row, err := x.fn(c)
			trOn = false
			if err != nil {
				t.Fatal(err)
			}
			txt, meds := trAnalyze(t, x.name, uint64(c.Warmup), row.Latency)
			if os.Getenv("WALCAST_RTTTRACE_QUIET") == "" {
				t.Logf("run %d:\n%s", r, txt)
			}
			all[x.name] = append(all[x.name], meds)
		}
	}
}
