package raft

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// memSM is a state machine that keeps the payloads it applied, as if
// durably: tests keep it across a host's restart. It records an error
// when an entry is applied twice or out of order.
type memSM struct {
	mu       sync.Mutex
	values   []string
	applied  uint64
	restores int
	err      error
	// failAt makes Apply fail at this index (0: never).
	failAt uint64
}

type memSMState struct {
	Values  []string `json:"values"`
	Applied uint64   `json:"applied"`
}

func (s *memSM) Apply(entries []Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range entries {
		if e.Index <= s.applied && s.err == nil {
			s.err = fmt.Errorf("entry %d applied after %d", e.Index, s.applied)
		}
		if s.failAt != 0 && e.Index >= s.failAt {
			return fmt.Errorf("memSM: failing at %d", e.Index)
		}
		s.values = append(s.values, string(e.Data))
		s.applied = e.Index
	}
	return nil
}

func (s *memSM) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(memSMState{Values: s.values, Applied: s.applied})
}

func (s *memSM) Restore(data []byte) error {
	var st memSMState
	if len(data) > 0 {
		if err := json.Unmarshal(data, &st); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.values, s.applied = st.Values, st.Applied
	s.restores++
	return nil
}

func (s *memSM) Applied() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.applied
}

func (s *memSM) snapshot() (values []string, restores int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.values), s.restores, s.err
}
