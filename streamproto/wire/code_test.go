package wire

import (
	"errors"
	"fmt"
	"testing"
)

// Ensure every code has a name and a Code matches itself with errors.Is.
func TestCodeError(t *testing.T) {
	for c := CodeOK; c <= CodeNoOffset; c++ {
		if got := c.Error(); got == fmt.Sprintf("unknown response code %#02x", uint16(c)) {
			t.Errorf("code %#02x has no name", uint16(c))
		}
	}
	if got, want := CodeStreamDoesNotExist.Error(), "stream does not exist (code 0x02)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := Code(0x42).Error(), "unknown response code 0x42"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got, want := Code(0).Error(), "unknown response code 0x00"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	err := fmt.Errorf("create: %w", CodeStreamAlreadyExists)
	if !errors.Is(err, CodeStreamAlreadyExists) || errors.Is(err, CodeStreamDoesNotExist) {
		t.Errorf("errors.Is does not tell codes apart: %v", err)
	}
}
