package tune

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ParseCPUList parses the kernel's CPU list format ("0-3,5,7-8"); empty
// input and the empty string "(null)" give an empty list. The result is
// sorted and without duplicates.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	var out []int
	if s == "" || s == "(null)" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		// "0-7:2/4" (used-group syntax) is accepted only as a plain range.
		if i := strings.IndexByte(part, ':'); i >= 0 {
			part = part[:i]
		}
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("tune: bad CPU list %q: %q", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a || b-a > 1<<16 {
				return nil, fmt.Errorf("tune: bad CPU list %q: %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// FormatCPUList formats cpus (any order) in the kernel's list format.
func FormatCPUList(cpus []int) string {
	c := slices.Clone(cpus)
	slices.Sort(c)
	c = slices.Compact(c)
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if j == i {
			fmt.Fprintf(&b, "%d", c[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", c[i], c[j])
		}
		i = j + 1
	}
	return b.String()
}

// cpusOf returns the members of want that are in have, and those that are not.
func cpusOf(want, have []int) (in, out []int) {
	for _, c := range want {
		if slices.Contains(have, c) {
			in = append(in, c)
		} else {
			out = append(out, c)
		}
	}
	return in, out
}

// cmdlineParam returns the value of name= on a kernel command line (the
// last occurrence wins, as in the kernel) and whether it was present.
// Everything after a lone "--" belongs to init and is ignored.
func cmdlineParam(cmdline, name string) (string, bool) {
	val, ok := "", false
	for f := range strings.FieldsSeq(cmdline) {
		if f == "--" {
			break
		}
		if f == name {
			val, ok = "", true
			continue
		}
		if v, found := strings.CutPrefix(f, name+"="); found {
			val, ok = v, true
		}
	}
	return val, ok
}

// isolcpusList splits isolcpus=[flag,...,]list into its flags (nohz,
// domain, managed_irq) and CPU list.
func isolcpusList(v string) (flags []string, cpus []int, err error) {
	var list []string
	for p := range strings.SplitSeq(v, ",") {
		if p != "" && (p[0] < '0' || p[0] > '9') {
			flags = append(flags, p)
			continue
		}
		list = append(list, p)
	}
	cpus, err = ParseCPUList(strings.Join(list, ","))
	return flags, cpus, err
}
