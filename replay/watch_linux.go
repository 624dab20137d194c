package replay

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// watchDir returns a reader that yields inotify events (ignored: any read
// means "something changed") for writes, renames and creations in dir.
// The fd is non-blocking so the Go poller parks the reading goroutine and
// Close unblocks it. IN_MODIFY fires for O_DIRECT pwrites too (the VFS
// raises it for every write).
func watchDir(dir string) (io.ReadCloser, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("replay: inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_MODIFY|unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_CREATE); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("replay: inotify watch %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "inotify:"+dir), nil
}
