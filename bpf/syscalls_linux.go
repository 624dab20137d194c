package bpf

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
)

// SyscallCounter counts the system calls of chosen threads: a BPF program
// on the raw sys_enter tracepoint (no tracefs mount needed) increments a
// per-thread counter for every thread id in its map. It counts what the
// kernel saw, the Go runtime's own calls on that thread included, so a
// datapath's syscalls per operation are measured without its cooperation.
// While attached it adds a hash lookup to every system call on the host.
type SyscallCounter struct {
	counts *ebpf.Map
	prog   *ebpf.Program
	lk     link.Link
}

// NewSyscallCounter loads and attaches the counter for up to maxThreads
// watched threads.
func NewSyscallCounter(maxThreads int) (_ *SyscallCounter, err error) {
	if maxThreads < 1 || maxThreads > 4096 {
		return nil, fmt.Errorf("bpf: syscall counter for %d threads: want 1..4096", maxThreads)
	}
	if err := prepare(); err != nil {
		return nil, err
	}
	s := &SyscallCounter{}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	s.counts, err = ebpf.NewMap(&ebpf.MapSpec{Name: "walcast_sysc", Type: ebpf.Hash, KeySize: 4, ValueSize: 8, MaxEntries: uint32(maxThreads)})
	if err != nil {
		return nil, fmt.Errorf("bpf: create syscall count map: %w", err)
	}
	s.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "walcast_sysc",
		Type:         ebpf.RawTracepoint,
		License:      "Dual MIT/GPL",
		Instructions: syscallCounterInsns(s.counts.FD()),
	})
	if err != nil {
		return nil, fmt.Errorf("bpf: load syscall counter: %w", err)
	}
	s.lk, err = link.AttachRawTracepoint(link.RawTracepointOptions{Name: "sys_enter", Program: s.prog})
	if err != nil {
		return nil, fmt.Errorf("bpf: attach syscall counter to raw tracepoint sys_enter: %w", err)
	}
	return s, nil
}

// syscallCounterInsns: key = (u32)bpf_get_current_pid_tgid() (the thread
// id); if the key is in the map, add 1 to its value.
func syscallCounterInsns(mapFD int) asm.Instructions {
	in := asm.Instructions{
		asm.FnGetCurrentPidTgid.Call(),
		asm.StoreMem(asm.RFP, stackKey, asm.R0, asm.Word), // the low half: the thread id
	}
	in = append(in, lookup(mapFD, stackKey, "out")...)
	return append(in,
		asm.Mov.Imm(asm.R1, 1),
		asm.AddAtomic.Mem(asm.R0, asm.R1, asm.DWord, 0),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	)
}

// Watch starts counting thread tid (from zero).
func (s *SyscallCounter) Watch(tid int) error {
	if err := s.counts.Put(uint32(tid), uint64(0)); err != nil {
		return fmt.Errorf("bpf: watch thread %d: %w", tid, err)
	}
	return nil
}

// Unwatch stops counting thread tid and frees its slot: the counter
// holds maxThreads threads at a time, so a caller that watches
// short-lived threads one after another must unwatch each.
func (s *SyscallCounter) Unwatch(tid int) error {
	if err := s.counts.Delete(uint32(tid)); err != nil {
		return fmt.Errorf("bpf: unwatch thread %d: %w", tid, err)
	}
	return nil
}

// Count returns the system calls thread tid entered since Watch.
func (s *SyscallCounter) Count(tid int) (uint64, error) {
	var n uint64
	if err := s.counts.Lookup(uint32(tid), &n); err != nil {
		return 0, fmt.Errorf("bpf: syscall count of thread %d: %w", tid, err)
	}
	return n, nil
}

// Close detaches the program and frees it and the map.
func (s *SyscallCounter) Close() error {
	var err error
	if s.lk != nil {
		err = s.lk.Close()
	}
	if s.prog != nil {
		err = errors.Join(err, s.prog.Close())
	}
	if s.counts != nil {
		err = errors.Join(err, s.counts.Close())
	}
	return err
}
