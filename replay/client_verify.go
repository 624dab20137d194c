package replay

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/walcast/walcast/wire"
)

// Verify asks the endpoints, in order, whether the stream holds record
// seq with payload CRC crc (any CRC when checkCRC is false): it requests from seq and reads until that
// record arrives (live tail included) or wait passes. It returns true
// when an endpoint has the same record, false when the record there
// differs or does not appear within wait (a sender that restarted and
// lost it), and an error when no endpoint could be asked. It does not
// move the tip or call a handler.
func (c *Client) Verify(ctx context.Context, seq uint64, crc uint32, checkCRC bool, wait time.Duration) (bool, error) {
	if seq == 0 {
		return false, fmt.Errorf("%w: verify seq 0", ErrConfig)
	}
	var lastErr error
	for _, ep := range c.cfg.Endpoints {
		conn, raw, err := c.connectFrom(ctx, ep, seq)
		if err != nil {
			lastErr = err
			continue
		}
		same, err := c.verifySession(ctx, conn, raw, seq, crc, checkCRC, wait)
		if errors.Is(err, ErrNotAvailable) {
			lastErr = err
			continue
		}
		return same, err
	}
	return false, fmt.Errorf("%w (%d endpoints): %w", ErrAllEndpoints, len(c.cfg.Endpoints), lastErr)
}

func (c *Client) verifySession(ctx context.Context, conn, raw net.Conn, seq uint64, crc uint32, checkCRC bool, wait time.Duration) (bool, error) {
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	defer stop()
	deadline := time.Now().Add(wait)
	_ = raw.SetReadDeadline(deadline)
	br := bufio.NewReaderSize(conn, 4096)
	var buf [wire.HeaderSize + wire.MaxPayload]byte
	for {
		if _, err := io.ReadFull(br, buf[:wire.HeaderSize]); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return false, nil // not there within wait
			}
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			return false, fmt.Errorf("replay: verify: %w", err)
		}
		hd, err := wire.ParseHeader(buf[:])
		if err != nil {
			return false, fmt.Errorf("replay: verify: %w", err)
		}
		n := wire.HeaderSize + int(hd.Len)
		if _, err := io.ReadFull(br, buf[wire.HeaderSize:n]); err != nil {
			return false, fmt.Errorf("replay: verify: %w", err)
		}
		_, p, _, err := wire.DecodeFrame(buf[:n])
		if err != nil {
			return false, fmt.Errorf("replay: verify: %w", err)
		}
		switch hd.Type {
		case wire.TypeNotAvailable:
			return false, ErrNotAvailable
		case wire.TypeCaughtUp:
			continue
		}
		if s := wire.Seq(p); s == seq {
			return !checkCRC || hd.CRC == crc, nil
		} else if s > seq {
			return false, nil
		}
	}
}
