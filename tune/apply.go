package tune

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// UndoHeader starts every undo file. The format, shared with
// scripts/tune.sh, is one change per line, tab-separated:
//
//	kind  target  name  prev  new
//
// kind is file, feature or coalesce (see [ChangeKind]); name is "-" for
// files. Lines starting with # are comments.
const UndoHeader = "# walcast tune undo file: kind\ttarget\tname\tprev\tnew; restore with `cast tune undo FILE` or `scripts/tune.sh undo FILE`\n"

// Apply performs the [Change]s of every result in rs that is [Result.Bad].
// For each it reads the current value, skips the change when it already
// holds, writes the new value, and then appends the change with its
// previous value to undo (so an interrupted Apply stays undoable up to
// the last line written). It goes on after a failed change and returns
// the changes made, in order, and every failure joined.
func Apply(rs []Result, p Prober, undo io.Writer) ([]Change, error) {
	var done []Change
	var errs []error
	for _, r := range rs {
		if !r.Bad() {
			continue
		}
		for _, c := range r.Changes {
			prev, err := Current(c, p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: read %s: %w", r.ID, c, err))
				continue
			}
			if prev == c.Value {
				continue
			}
			if err := set(c, c.Value, p); err != nil {
				errs = append(errs, fmt.Errorf("%s: set %s to %s: %w", r.ID, c, c.Value, err))
				continue
			}
			c.Prev = prev
			done = append(done, c)
			if undo != nil {
				if _, err := io.WriteString(undo, undoLine(c)); err != nil {
					return done, errors.Join(append(errs, fmt.Errorf("tune: write undo file: %w", err))...)
				}
			}
		}
	}
	return done, errors.Join(errs...)
}

// Undo reads an undo file and restores every previous value, last change
// first. It goes on after a failure and returns what it restored (Value
// is the restored value, Prev what was there) and every failure joined.
func Undo(r io.Reader, p Prober) ([]Change, error) {
	cs, err := ParseUndo(r)
	if err != nil {
		return nil, err
	}
	var done []Change
	var errs []error
	for i := len(cs) - 1; i >= 0; i-- {
		c := cs[i]
		now, err := Current(c, p)
		if err != nil {
			errs = append(errs, fmt.Errorf("undo: read %s: %w", c, err))
			continue
		}
		if err := set(c, c.Prev, p); err != nil {
			errs = append(errs, fmt.Errorf("undo: set %s to %s: %w", c, c.Prev, err))
			continue
		}
		done = append(done, Change{Kind: c.Kind, Target: c.Target, Name: c.Name, Value: c.Prev, Prev: now})
	}
	return done, errors.Join(errs...)
}

// ParseUndo reads the changes of an undo file in file order.
func ParseUndo(r io.Reader) ([]Change, error) {
	var cs []Change
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 5 {
			return nil, fmt.Errorf("tune: undo line %d: %d fields, want 5", n, len(f))
		}
		c := Change{Kind: ChangeKind(f[0]), Target: f[1], Name: f[2], Prev: f[3], Value: f[4]}
		if c.Name == "-" {
			c.Name = ""
		}
		switch c.Kind {
		case KindFile, KindFeature, KindCoalesce:
		default:
			return nil, fmt.Errorf("tune: undo line %d: unknown kind %q", n, f[0])
		}
		if c.Target == "" || (c.Kind != KindFile && c.Name == "") {
			return nil, fmt.Errorf("tune: undo line %d: missing target or name", n)
		}
		cs = append(cs, c)
	}
	return cs, sc.Err()
}

func undoLine(c Change) string {
	name := c.Name
	if name == "" {
		name = "-"
	}
	clean := func(s string) string { return strings.NewReplacer("\t", " ", "\n", " ").Replace(s) }
	return strings.Join([]string{string(c.Kind), clean(c.Target), clean(name), clean(c.Prev), clean(c.Value)}, "\t") + "\n"
}

// Current reads the value c would change, in the form c.Value uses
// ("madvise" for a choice file showing "always [madvise] never").
func Current(c Change, p Prober) (string, error) {
	switch c.Kind {
	case KindFile:
		v, err := readValue(c.Target)
		if err != nil {
			return "", err
		}
		return bracketed(v), nil
	case KindFeature:
		fs, err := p.Features(c.Target)
		if err != nil {
			return "", err
		}
		on, ok := fs[c.Name]
		if !ok {
			return "", fmt.Errorf("no feature %q: %w", c.Name, ErrNotSupported)
		}
		return onOff(on), nil
	case KindCoalesce:
		cs, err := p.Coalesce(c.Target)
		if err != nil {
			return "", err
		}
		v, ok := cs[c.Name]
		if !ok {
			return "", fmt.Errorf("no coalescing parameter %q: %w", c.Name, ErrNotSupported)
		}
		return strconv.FormatUint(uint64(v), 10), nil
	}
	return "", fmt.Errorf("tune: unknown change kind %q", c.Kind)
}

func set(c Change, v string, p Prober) error {
	switch c.Kind {
	case KindFile:
		// O_TRUNC without O_CREATE: sysfs and procfs accept it, and a
		// missing file stays missing instead of being created.
		f, err := os.OpenFile(c.Target, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteString(v + "\n")
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case KindFeature:
		if v != "on" && v != "off" {
			return fmt.Errorf("tune: feature value %q is not on/off", v)
		}
		return p.SetFeature(c.Target, c.Name, v == "on")
	case KindCoalesce:
		switch v {
		case "on":
			v = "1"
		case "off":
			v = "0"
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return fmt.Errorf("tune: coalescing value %q: %w", v, err)
		}
		return p.SetCoalesce(c.Target, c.Name, uint32(n))
	}
	return fmt.Errorf("tune: unknown change kind %q", c.Kind)
}
