// Package affinity runs a function on a locked OS thread pinned to one
// CPU, finds isolated CPUs, paces polling loops (idle strategies), and
// offers the opt-in real-time knobs (SCHED_FIFO, mlockall). It owns
// thread placement only: it never creates sockets, never logs, and never
// unlocks a thread it locked (the runtime retires the thread when its
// goroutine exits, so a pin or an RT policy never leaks to other
// goroutines).
package affinity
