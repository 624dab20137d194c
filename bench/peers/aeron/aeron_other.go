//go:build !linux

package aeron

import (
	"errors"

	"github.com/walcast/walcast/bench/peers"
)

type api struct{}

func load() (*api, error) {
	return nil, errors.New("aeron: the purego binding of " + Library + " is built for Linux only")
}

func open(peers.Config) (*peers.Pair, error) {
	_, err := load()
	return nil, err
}
