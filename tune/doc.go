// Package tune owns walcast's host checks and the run-time settings that
// fix them: isolated CPUs, IRQ affinity, CPU frequency and idle states,
// transparent huge pages, swap, socket-buffer and busy-poll sysctls, NIC
// offloads and coalescing, RT throttling, timer slack, the WAL directory's
// filesystem and clock source. `cast tune` and scripts/tune.sh are its
// front ends.
//
// Checks read /proc and /sys under roots given in [Config] (so tests run
// them against fixture trees in testdata/) and call a [Prober] for what
// needs a live kernel (ethtool ioctls, a socket, an O_DIRECT file).
// [Apply] writes only what a [Result] lists as its [Change]s and records
// the previous value of each in an undo file that [Undo] replays.
//
// What it must not do: change anything in [Run] (checks are read-only,
// apart from a probe file created and removed in the WAL directory and a
// socket that is closed again), touch the kernel command line (reboot
// items are printed, never applied), log, or import other walcast
// packages.
package tune
