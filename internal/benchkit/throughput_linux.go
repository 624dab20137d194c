package benchkit

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/walcast/walcast/affinity"
	"github.com/walcast/walcast/batch"
	"github.com/walcast/walcast/datapath/mmsg"
)

// ThroughputRaw is the throughput floor: a pinned thread blasting
// Size-byte frames with sendmmsg (with GSO if c.GSO) and a pinned thread
// draining them with recvmmsg (with GRO if c.GRO), no protocol, no rate
// limit. Records counts frames delivered; what the receiver could not keep
// up with is lost and reported in Note.
func ThroughputRaw(c ThroughputConfig) (Row, error) {
	if err := c.Validate(); err != nil {
		return Row{}, err
	}
	rc := mmsg.DefaultConfig()
	rc.NoGRO, rc.Batch = !c.GRO, c.Batch
	rx, err := mmsg.New(rc)
	if err != nil {
		return Row{}, err
	}
	defer rx.Close()
	sc := mmsg.DefaultConfig()
	sc.NoGSO, sc.Batch, sc.Peer = !c.GSO, c.Batch, rx.LocalAddr()
	tx, err := mmsg.New(sc)
	if err != nil {
		return Row{}, err
	}
	defer tx.Close()

	affinity.EnsureGOMAXPROCS(2)
	var stop, sending atomic.Bool
	var got, bad atomic.Int64
	var rxErr error
	recv, err := affinity.Go(affinity.OnCPU(c.CPUs[1]), func() {
		v := batch.New(c.Batch, 2048)
		var n64, b64 int64
		for !stop.Load() {
			n, err := rx.Recv(v)
			if err != nil {
				rxErr = err
				return
			}
			for i := 0; i < n; i++ {
				m, _ := v.Msg(i)
				if len(m) != c.Size {
					b64++
				}
			}
			if n > 0 {
				n64 += int64(n)
				got.Store(n64)
			}
		}
		got.Store(n64)
		bad.Store(b64)
	})
	if err != nil {
		return Row{}, err
	}
	var sent int64
	var txErr error
	var el time.Duration
	sending.Store(true)
	send, err := affinity.Go(affinity.OnCPU(c.CPUs[0]), func() {
		v, frames := sendViews(c)
		start := time.Now()
		end := start.Add(c.Duration)
		var seq uint64
		for i := 0; ; i++ {
			if i&63 == 0 && !time.Now().Before(end) {
				break
			}
			if c.Window > 0 && sent-got.Load() > int64(c.Window) {
				continue // the receiver is behind: wait for it
			}
			for _, b := range frames {
				binary.LittleEndian.PutUint64(b, seq)
				seq++
			}
			n, err := tx.Send(v)
			if err != nil {
				txErr = err
				break
			}
			sent += int64(n)
			seq -= uint64(v.Len() - n)
		}
		el = time.Since(start)
	})
	if err != nil {
		stop.Store(true)
		recv.Wait()
		return Row{}, err
	}
	send.Wait()
	drainRaw(func() bool { return got.Load() >= sent }, got.Load, func() uint64 { return rx.Stats().RecvCalls }, rawDrainCap)
	stop.Store(true)
	recv.Wait()
	if txErr != nil {
		return Row{}, txErr
	}
	if rxErr != nil {
		return Row{}, rxErr
	}
	name := "raw-sendmmsg"
	f := tx.Features()
	if f.GSO && rx.Features().GRO {
		name = "raw-gso-gro"
	} else if f.GSO {
		name = "raw-gso"
	}
	row := Row{Workload: "throughput", Name: name, Path: "mmsg"}
	row.fill(got.Load(), c.Size, el.Seconds())
	loss := 0.0
	if sent > 0 {
		loss = 100 * float64(sent-got.Load()) / float64(sent)
	}
	ts := tx.Stats()
	row.Note = fmt.Sprintf("size=%d sent=%d loss=%.1f%% kernel_drops=%d calls=%d eagain=%d enobufs=%d", c.Size, sent, loss, rx.Stats().KernelDrops, ts.SendCalls, ts.EAGAIN, ts.ENOBUFS)
	if b := bad.Load(); b > 0 {
		row.Note += fmt.Sprintf(" wrong_size=%d", b)
	}
	return row, nil
}

// Budgets of drainRaw: what is still missing counts as lost once the
// receiver has polled rawStallPolls times in a row without receiving
// anything (it ran and found the socket empty), and the wait ends after
// rawDrainCap whatever the receiver did.
const (
	rawStallPolls = 20_000
	rawDrainCap   = 10 * time.Second
)

// drainRaw waits after the last send until done() holds (the receiver
// has everything in flight), or until the receiver polls rawStallPolls
// times without got() moving (polls() counts its receive calls), or
// limit. Progress, not a fixed time: on a loaded machine the pinned
// receiver may not have run at all yet when a short row stops sending,
// and a fixed sleep would count that as 100 % loss.
func drainRaw(done func() bool, got func() int64, polls func() uint64, limit time.Duration) {
	end := time.Now().Add(limit)
	last, from := got(), polls()
	for !done() && time.Now().Before(end) {
		time.Sleep(time.Millisecond)
		if g := got(); g != last {
			last, from = g, polls()
		} else if polls()-from >= rawStallPolls {
			return
		}
	}
}

// sendViews is the datapath rows' send batch: c.PerSend() frames of c.Size
// bytes back to back in one buffer, appended as views, so that the
// kernel gets them as one iovec the way the casting rows hand over a run
// of frames from the hot ring (and the floor its one buffer); frames are
// the views, for stamping.
func sendViews(c ThroughputConfig) (*batch.Vec, [][]byte) {
	v := batch.New(c.Batch, 2048)
	buf := make([]byte, c.PerSend()*c.Size)
	frames := make([][]byte, c.PerSend())
	for i := range frames {
		frames[i] = buf[i*c.Size : (i+1)*c.Size : (i+1)*c.Size]
		v.AppendView(frames[i], netip.AddrPort{})
	}
	return v, frames
}
