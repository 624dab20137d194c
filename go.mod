module github.com/walcast/walcast

go 1.26.0

require github.com/klauspost/crc32 v1.3.0

require golang.org/x/sys v0.50.0 // indirect
