package replay

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ReadTip returns the seq stored in the tip file at path: the last record
// the consumer applied. A missing, empty or unparseable file is tip 0
// (start from seq 1), as in the reference; other read errors are returned.
func ReadTip(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("replay: read tip: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, nil
	}
	return n, nil
}

// TipTempPath is the sibling temp file WriteTip writes before renaming:
// path with its extension replaced by "tmp" (the reference's name).
func TipTempPath(path string) string {
	ext := filepath.Ext(path)
	return path[:len(path)-len(ext)] + ".tmp"
}

// WriteTip stores tip at path atomically: bare decimal, no newline,
// written and fsynced to a sibling temp file, renamed over path, then the
// directory is fsynced so the rename survives a crash. Unlike the
// reference it also syncs the temp file, so a crash right after the
// rename cannot leave an empty tip (which would restart from seq 1).
func WriteTip(path string, tip uint64) error {
	tmp := TipTempPath(path)
	if tmp == path {
		tmp = path + ".tmp"
	}
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("replay: write tip: %w", err)
	}
	var buf [20]byte
	_, err = f.Write(strconv.AppendUint(buf[:0], tip, 10))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replay: write tip: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replay: write tip: %w", err)
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("replay: write tip: sync dir: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("replay: write tip: sync dir: %w", err)
	}
	return nil
}
