// Package erlterm renders values as Erlang's io_lib prints terms with ~p,
// for the texts Warren copies from RabbitMQ (reply texts, policy
// validation errors), which print Erlang terms.
package erlterm

import (
	"strconv"
	"strings"
)

// Float renders a float as Erlang's shortest round-trip form: 1.5, 100.0,
// 1.0e20, 1.0e-7.
func Float(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	mant, exp, hasExp := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") && !strings.ContainsAny(mant, "NI") {
		mant += ".0"
	}
	if !hasExp {
		return mant
	}
	exp = strings.TrimPrefix(exp, "+")
	neg := strings.HasPrefix(exp, "-")
	exp = strings.TrimLeft(strings.TrimPrefix(exp, "-"), "0")
	if neg {
		exp = "-" + exp
	}
	return mant + "e" + exp
}
