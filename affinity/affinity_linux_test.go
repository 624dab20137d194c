package affinity

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestGoPinsOnlyItsThread(t *testing.T) {
	before, err := CurrentCPUs()
	if err != nil {
		t.Fatal(err)
	}
	cpu := before[len(before)-1]
	var got []int
	var tid int
	th, err := Go(OnCPU(cpu), func() {
		got, _ = CurrentCPUs()
		tid = unix.Gettid()
	})
	if err != nil {
		t.Fatal(err)
	}
	th.Wait()
	if !slices.Equal(got, []int{cpu}) {
		t.Fatalf("thread CPUs %v, want [%d]", got, cpu)
	}
	// The caller's own mask is unchanged.
	if now, _ := CurrentCPUs(); !slices.Equal(now, before) {
		t.Fatalf("caller mask changed: %v -> %v", before, now)
	}
	// The locked goroutine exited without unlocking, so the runtime
	// retired its thread: the tid is gone (or, rarely, reused unpinned).
	// Thread exit follows Done asynchronously: poll briefly. If the
	// goroutine happened to run on the main thread, the runtime cannot
	// exit that thread and wedges it instead (mexit on m0): it never runs
	// Go code again, so the pin does not leak either.
	if tid == os.Getpid() {
		return
	}
	pinned := func() bool {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
		return err == nil && strings.Contains(string(b), "Cpus_allowed_list:\t"+strconv.Itoa(cpu)+"\n")
	}
	for i := 0; i < 200 && pinned(); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if len(before) > 1 && pinned() {
		t.Fatalf("pinned thread %d still alive after its goroutine exited", tid)
	}
}

func TestGoRejectsBadCPU(t *testing.T) {
	ran := false
	if _, err := Go(OnCPU(1023), func() { ran = true }); err == nil || ran {
		t.Fatalf("pin to CPU 1023 succeeded (ran=%v)", ran)
	}
}

func TestIsolated(t *testing.T) {
	iso, err := Isolated()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("isolated=%v nohz_full=%v cmdline=%q", iso.Isolated, iso.NohzFull, iso.Cmdline)
}

func TestFIFO(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SCHED_FIFO needs CAP_SYS_NICE; not root")
	}
	var policy int
	th, err := Go(Config{FIFO: 1}, func() {
		a, err := unix.SchedGetAttr(0, 0)
		if err == nil {
			policy = int(a.Policy)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	th.Wait()
	if policy != unix.SCHED_FIFO {
		t.Fatalf("policy %d", policy)
	}
}
