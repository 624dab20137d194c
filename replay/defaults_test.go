package replay

import (
	"errors"
	"reflect"
	"testing"
)

// TestZeroConfigIsDefault: a zero field means its default; a negative
// one means "none" (no timeout, no cap).
func TestZeroConfigIsDefault(t *testing.T) {
	if got, want := (ServerConfig{}).withDefaults(), DefaultServerConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("zero server config %+v, want %+v", got, want)
	}
	if got, want := (ClientConfig{}).withDefaults(), DefaultClientConfig(); !reflect.DeepEqual(got, want) {
		t.Fatalf("zero client config %+v, want %+v", got, want)
	}
	if err := (ServerConfig{Plaintext: true}).Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (ClientConfig{Plaintext: true, Endpoints: []string{"x:1"}}).Validate(); err != nil {
		t.Fatal(err)
	}
	off := (ClientConfig{RetryBudget: -1, Jitter: -1}).withDefaults()
	if off.RetryBudget != 0 || off.Jitter != 0 {
		t.Fatalf("negative not off: %+v", off)
	}
	if s := (ServerConfig{MaxConns: -1}).withDefaults(); s.MaxConns != 0 {
		t.Fatalf("negative MaxConns is not 'no cap': %d", s.MaxConns)
	}
	if err := (ClientConfig{Plaintext: true}).Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("no endpoints accepted: %v", err)
	}
}
