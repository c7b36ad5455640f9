// Command gen writes amqp/wire/spec_gen.go from the AMQP 0-9-1 XML
// specification. Run it from amqp/wire with `go generate`:
//
//	go generate ./amqp/wire
//
// Flags name the inputs and the output; the defaults are the checked-in
// files, relative to amqp/wire.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/warren-mq/warren/amqp/wire/internal/specgen"
)

func main() {
	specPath := flag.String("spec", "spec/amqp0-9-1.extended.xml", "main XML specification")
	extraPath := flag.String("extra", "spec/amqp0-9-1.access.xml", "extra XML (the access class)")
	out := flag.String("out", "spec_gen.go", "output Go file")
	flag.Parse()
	if err := run(*specPath, *extraPath, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, extraPath, out string) error {
	src, err := generate(specPath, extraPath)
	if err != nil {
		return err
	}
	return os.WriteFile(out, src, 0o644)
}

func generate(specPath, extraPath string) ([]byte, error) {
	main, err := os.Open(specPath)
	if err != nil {
		return nil, err
	}
	defer main.Close()
	var extra []io.Reader
	if extraPath != "" {
		f, err := os.Open(extraPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		extra = append(extra, f)
	}
	spec, err := specgen.Parse(main, extra...)
	if err != nil {
		return nil, err
	}
	return specgen.Generate(spec)
}
