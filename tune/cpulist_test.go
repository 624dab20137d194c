package tune

import (
	"slices"
	"testing"
)

func TestCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want []int
		fmt  string
		ok   bool
	}{
		{"", nil, "", true},
		{"(null)", nil, "", true},
		{"0", []int{0}, "0", true},
		{"0-3,5,7-8\n", []int{0, 1, 2, 3, 5, 7, 8}, "0-3,5,7-8", true},
		{"3,1,2,2", []int{1, 2, 3}, "1-3", true},
		{"0-7:2/4", []int{0, 1, 2, 3, 4, 5, 6, 7}, "0-7", true},
		{"3-1", nil, "", false},
		{"a", nil, "", false},
		{"-1", nil, "", false},
		{"0-99999999", nil, "", false},
	}
	for _, tc := range tests {
		got, err := ParseCPUList(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("%q: err %v", tc.in, err)
			continue
		}
		if !tc.ok {
			continue
		}
		if len(got) != len(tc.want) || (len(got) > 0 && !slices.Equal(got, tc.want)) {
			t.Errorf("%q: %v, want %v", tc.in, got, tc.want)
		}
		if f := FormatCPUList(got); f != tc.fmt {
			t.Errorf("%q: formatted %q, want %q", tc.in, f, tc.fmt)
		}
	}
}

func TestCmdline(t *testing.T) {
	line := "ro isolcpus=1 quiet isolcpus=nohz,domain,managed_irq,2-3,6 nohz_full rcu_nocbs=2-3 -- isolcpus=9"
	tests := []struct {
		param, val string
		ok         bool
	}{
		{"isolcpus", "nohz,domain,managed_irq,2-3,6", true},
		{"nohz_full", "", true},
		{"rcu_nocbs", "2-3", true},
		{"quiet", "", true},
		{"irqaffinity", "", false},
	}
	for _, tc := range tests {
		v, ok := cmdlineParam(line, tc.param)
		if v != tc.val || ok != tc.ok {
			t.Errorf("%s: %q %v, want %q %v", tc.param, v, ok, tc.val, tc.ok)
		}
	}
	flags, cpus, err := isolcpusList("nohz,domain,managed_irq,2-3,6")
	if err != nil || !slices.Equal(flags, []string{"nohz", "domain", "managed_irq"}) || !slices.Equal(cpus, []int{2, 3, 6}) {
		t.Errorf("isolcpusList: %v %v %v", flags, cpus, err)
	}
}

func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,5", "", "1,2,3", "0-7:2/4", "9-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := ParseCPUList(s)
		if err != nil {
			return
		}
		again, err := ParseCPUList(FormatCPUList(cpus))
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("%q: %v does not round-trip: %v %v", s, cpus, again, err)
		}
	})
}
