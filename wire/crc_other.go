//go:build !amd64

package wire

const crcFast = false

func crc3way(uint32, []byte, *[crcBlockWords + 1][2]uint64) uint32 {
	panic("wire: crc3way is amd64 only")
}
