package replay

import (
	"io"
)

// connWriter is a bufio.Writer over a buffer the server owns (see
// connMem): bytes are copied into buf and written to w when it fills or
// on Flush. The first write error is sticky.
type connWriter struct {
	w   io.Writer
	buf []byte
	n   int
	err error
}

func (b *connWriter) Write(p []byte) (int, error) {
	nn := 0
	for len(p) > 0 && b.err == nil {
		if b.n == 0 && len(p) >= len(b.buf) {
			// Nothing buffered and p fills a buffer: write it directly.
			n, err := b.w.Write(p)
			nn, p, b.err = nn+n, p[n:], err
			continue
		}
		k := copy(b.buf[b.n:], p)
		b.n, nn, p = b.n+k, nn+k, p[k:]
		if b.n == len(b.buf) {
			_ = b.Flush()
		}
	}
	return nn, b.err
}

// Flush writes what is buffered.
func (b *connWriter) Flush() error {
	if b.err != nil || b.n == 0 {
		return b.err
	}
	n, err := b.w.Write(b.buf[:b.n])
	if err == nil && n < b.n {
		err = io.ErrShortWrite
	}
	b.n, b.err = 0, err
	return err
}

// connMem is one connection's buffers: the write buffer (BufferBytes)
// and the cursor's read buffer (ReadBufferBytes), in one allocation that
// is given back to the operating system when the connection ends (on
// Linux an anonymous mapping, unmapped at once; elsewhere Go memory,
// returned by the garbage collector).
type connMem struct {
	mem  []byte
	w, r []byte
}

func newConnMem(wsize, rsize int) (*connMem, error) {
	mem, err := mapMem(wsize + rsize)
	if err != nil {
		return nil, err
	}
	return &connMem{mem: mem, w: mem[:wsize:wsize], r: mem[wsize:]}, nil
}

// release returns the memory. Nothing may use w or r afterwards: the
// caller releases only after the connection's writer and cursor are done.
func (m *connMem) release() {
	if m.mem != nil {
		unmapMem(m.mem)
		m.mem, m.w, m.r = nil, nil, nil
	}
}
