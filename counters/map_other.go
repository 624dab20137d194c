//go:build !unix

package counters

import "os"

// mapNew offers no shared mapping here: the counters live in process
// memory only, nothing is written and no other process sees them.
func mapNew(dir, final string, size int, init func([]byte)) ([]byte, *os.File, error) {
	return nil, nil, ErrNotSupported
}

func restore(f *os.File, size int) (bool, error) { return false, nil }

func unmap(mem []byte) error { return nil }

func mapRead(path string) ([]byte, func(), error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if len(b) < HeaderSize {
		return nil, nil, ErrFormat
	}
	return b, func() {}, nil
}

func alive(pid int) bool { return false }

// writable: no access(2) here; creating the directory tells.
var writable = func(dir string) bool { return true }
