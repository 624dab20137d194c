//go:build !linux

package main

import (
	"errors"
	"math/rand/v2"
)

var errRawFloor = errors.New("cast bench wal: the raw O_DIRECT floors need Linux")

type rawFile struct{}

func newRawFile(string, int64) (*rawFile, error)     { return nil, errRawFloor }
func (r *rawFile) writeSync(int64, int) (int, error) { return 0, errRawFloor }
func (r *rawFile) close()                            {}

type rawSegments struct{}

func openRawSegments(string, uint32, uint64, int64) (*rawSegments, error) { return nil, errRawFloor }
func (r *rawSegments) readRandom(*rand.Rand) error                        { return errRawFloor }
func (r *rawSegments) close()                                             {}

func dropCaches() bool { return false }
