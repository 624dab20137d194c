//go:build !linux

package replay

import (
	"errors"
	"io"
)

// errNoWatch: no directory notification here; DirSource polls.
var errNoWatch = errors.New("replay: directory notification not supported on this system")

func watchDir(string) (io.ReadCloser, error) { return nil, errNoWatch }
