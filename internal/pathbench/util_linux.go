package pathbench

import (
	"errors"
	"strconv"
	"strings"

	"github.com/walcast/walcast/internal/netns"
)

func isRefused(err error) bool { return errors.Is(err, errRefused) }

// busyPollRx sums TcpExt BusyPollRxPackets over the hosts' namespaces:
// the packets napi_busy_loop processed there (all sockets); -1 when one is
// unreadable.
func busyPollRx(hs ...netns.Host) int64 {
	var sum int64
	for _, h := range hs {
		v := busyPollRx1(h)
		if v < 0 {
			return -1
		}
		sum += v
	}
	return sum
}

func busyPollRx1(h netns.Host) int64 {
	out, err := h.Exec("cat", "/proc/net/netstat")
	if err != nil {
		return -1
	}
	lines := strings.Split(string(out), "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, vals := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "TcpExt:" || len(vals) != len(names) {
			continue
		}
		for k, n := range names {
			if n == "BusyPollRxPackets" {
				v, err := strconv.ParseInt(vals[k], 10, 64)
				if err != nil {
					return -1
				}
				return v
			}
		}
	}
	return -1
}
