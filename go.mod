module github.com/walcast/walcast

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	github.com/klauspost/crc32 v1.3.0
	golang.org/x/sys v0.50.0
)
