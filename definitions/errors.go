package definitions

import (
	"errors"
	"fmt"
	"strings"
)

// Errors of Parse and Import.
var (
	// ErrInvalid classifies a document that Parse or Import refused
	// (an *InvalidError): nothing was applied. The HTTP API answers it
	// with 400 and the error's reasons.
	ErrInvalid = errors.New("definitions: invalid definitions")
	// ErrPartial classifies an import that failed while applying a
	// document that had been validated (an I/O error, or a concurrent
	// change to what was checked): what was applied before the failure
	// stays applied.
	ErrPartial = errors.New("definitions: import failed part way")
)

// maxReasons bounds the reasons an InvalidError lists.
const maxReasons = 20

// InvalidError is a document refused before anything was applied, with
// every reason found (up to maxReasons), each naming the entity.
type InvalidError struct {
	Reasons []string
	More    int // reasons found beyond Reasons
}

func (e *InvalidError) Error() string { return "definitions: " + e.Reason() }

// Reason is the reasons in one sentence, as the HTTP API's 400 reason.
func (e *InvalidError) Reason() string {
	s := strings.Join(e.Reasons, "; ")
	if e.More > 0 {
		s += fmt.Sprintf("; and %d more", e.More)
	}
	return s
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// reasons collects the reasons of an InvalidError.
type reasons struct {
	list []string
	more int
}

func (r *reasons) add(format string, args ...any) {
	if len(r.list) >= maxReasons {
		r.more++
		return
	}
	r.list = append(r.list, fmt.Sprintf(format, args...))
}

func (r *reasons) err() error {
	if len(r.list) == 0 {
		return nil
	}
	return &InvalidError{Reasons: r.list, More: r.more}
}
