package cast

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestParseKeys(t *testing.T) {
	k, err := ParseKeys([]byte("# rollover\n 2 00112233445566778899aabbccddeeff\n\n1 ffeeddccbbaa99887766554433221100\n"))
	if err != nil {
		t.Fatal(err)
	}
	if k.Send.ID != 2 || k.Send.Secret[1] != 0x11 || len(k.Accept) != 1 || k.Accept[0].ID != 1 {
		t.Fatalf("parsed %+v", k)
	}
	for _, bad := range []string{
		"",                                     // no key
		"# only a comment\n",                   // no key
		"1\n",                                  // no secret
		"1 0011\n",                             // short secret
		"256 00112233445566778899aabbccddeeff", // id out of range
		"x 00112233445566778899aabbccddeeff",   // id not a number
		"1 zz112233445566778899aabbccddeeff",   // not hex
		"1 00112233445566778899aabbccddeeff extra",
		"1 00112233445566778899aabbccddeeff\n1 ffeeddccbbaa99887766554433221100\n", // one id twice
	} {
		if _, err := ParseKeys([]byte(bad)); !errors.Is(err, ErrKeyFile) {
			t.Errorf("%q: err %v, want ErrKeyFile", bad, err)
		}
	}
}

// LoadKeyFile refuses a key file others may read, or the group or others
// may write, naming the mode; 0600 and 0640 are fine.
func TestLoadKeyFilePermissions(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes: not on windows")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "stream.key")
	if err := os.WriteFile(path, []byte("7 00112233445566778899aabbccddeeff\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode os.FileMode
		ok   bool
	}{{0o600, true}, {0o640, true}, {0o400, true}, {0o644, false}, {0o604, false}, {0o660, false}, {0o602, false}} {
		if err := os.Chmod(path, c.mode); err != nil {
			t.Fatal(err)
		}
		k, err := LoadKeyFile(path)
		if c.ok && (err != nil || k.Send.ID != 7) {
			t.Errorf("mode %04o: %v", c.mode, err)
		}
		if !c.ok && !errors.Is(err, ErrKeyFile) {
			t.Errorf("mode %04o accepted (err %v)", c.mode, err)
		}
	}
	if _, err := LoadKeyFile(filepath.Join(dir, "missing")); !errors.Is(err, ErrKeyFile) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
