package queues

import "testing"

// Ensure x-match is validated with rabbit_exchange_type_headers's texts.
func TestValidateXMatch(t *testing.T) {
	for _, v := range []string{"all", "any", "all-with-x", "any-with-x"} {
		if err := validateXMatch(map[string]any{"x-match": v}); err != nil {
			t.Fatalf("x-match %s: %v", v, err)
		}
	}
	if err := validateXMatch(nil); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		v    any
		text string
	}{
		{"foo", `PRECONDITION_FAILED - Invalid x-match field value <<"foo">>; expected all, any, all-with-x, or any-with-x`},
		{"ALL", `PRECONDITION_FAILED - Invalid x-match field value <<"ALL">>; expected all, any, all-with-x, or any-with-x`},
		{int32(5), `PRECONDITION_FAILED - Invalid x-match field type signedint (value 5); expected longstr`},
		{[]byte("all"), `PRECONDITION_FAILED - Invalid x-match field type binary (value <<"all">>); expected longstr`},
		{true, `PRECONDITION_FAILED - Invalid x-match field type bool (value true); expected longstr`},
		{nil, `PRECONDITION_FAILED - Invalid x-match field type void (value undefined); expected longstr`},
	}
	for _, c := range cases {
		wantErr(t, validateXMatch(map[string]any{"x-match": c.v}), CodePreconditionFailed, c.text)
	}
}
