//go:build !linux

package main

import "os/exec"

func dieWithTest(*exec.Cmd) {}
