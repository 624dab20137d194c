//go:build !linux

package sock
