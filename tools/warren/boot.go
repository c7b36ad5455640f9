package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
)

// The boot id tells a restart of the process from a restart of the
// machine. After a process crash the page cache still holds everything
// the broker wrote, so only the tail of each stream's last segment can be
// torn; after a power cut anything written since the last sync can be
// damaged, anywhere in the last segment, and every chunk of it must be
// validated (osiris.Options.TrustTail). The data directory keeps the boot
// id of the machine that last opened it.

const (
	bootIDFile   = "BOOT_ID"
	bootIDSource = "/proc/sys/kernel/random/boot_id"
)

// currentBootID returns the machine's boot id, nil when it has none.
func currentBootID() []byte {
	b, err := os.ReadFile(bootIDSource)
	if err != nil {
		return nil
	}
	return bytes.TrimSpace(b)
}

// sameBoot reports whether dataDir was last opened since the machine's
// last boot: false when either boot id is unknown.
func sameBoot(dataDir string, current []byte) bool {
	if len(current) == 0 {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dataDir, bootIDFile))
	return err == nil && bytes.Equal(bytes.TrimSpace(b), current)
}

// recordBoot stores current as the boot id that last opened dataDir,
// durably: once every stream has been recovered under it.
func recordBoot(dataDir string, current []byte) error {
	if len(current) == 0 {
		return nil
	}
	path := filepath.Join(dataDir, bootIDFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	_, err = f.Write(append(append([]byte(nil), current...), '\n'))
	if err == nil {
		err = f.Sync()
	}
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(dataDir); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("boot id: %w", err)
	}
	return nil
}
