package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

// Definitions:
//
//	export_definitions  GET /api/definitions
//	import_definitions  POST /api/definitions

var definitionVerbs = []*verb{
	{
		name: "export_definitions", usage: `<file_path | "-">`, min: 1, max: 1,
		summary: "Exports definitions (users, vhosts, permissions, queues, exchanges, bindings, policies, parameters) as JSON to a file or, with -, to standard output",
		run:     runExportDefinitions,
	},
	{
		name: "import_definitions", usage: `[<file_path | "-">]`, min: 0, max: 1,
		summary: "Imports definitions in JSON from a file or (with - or no argument) standard input",
		run:     runImportDefinitions,
	},
}

func runExportDefinitions(c *cmd) error {
	path := c.args[0]
	if path != "-" {
		c.banner(`Exporting definitions in JSON to a file at "%s" ...`, path)
	}
	data, err := c.api.do(c.ctx, request{method: http.MethodGet, path: apiPath("definitions")})
	if err != nil {
		return err
	}
	if _, err := parseJSON(data); err != nil {
		return failf(exitSoftware, "unexpected response to GET %s: not JSON", apiPath("definitions"))
	}
	if path == "-" {
		c.out.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			fmt.Fprintln(c.out)
		}
		return nil
	}
	// Definitions hold password hashes: the file is private to its owner.
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return failf(exitDataErr, "cannot write definitions to %s: %v", path, err)
	}
	c.done()
	return nil
}

func runImportDefinitions(c *cmd) error {
	var (
		data []byte
		err  error
	)
	if len(c.args) == 0 || c.args[0] == "-" {
		c.banner("Importing definitions in JSON from standard input ...")
		data, err = io.ReadAll(c.stdin)
	} else {
		c.banner(`Importing definitions in JSON from a file at "%s" ...`, c.args[0])
		data, err = os.ReadFile(c.args[0])
	}
	if err != nil {
		return failf(exitDataErr, "cannot read definitions: %v", err)
	}
	if v, err := parseJSON(data); err != nil || v.kind != kObject {
		return failf(exitDataErr, "Failed to deserialise input (format: JSON): not a JSON object")
	}
	_, err = c.api.do(c.ctx, request{method: http.MethodPost, path: apiPath("definitions"), body: data})
	if err != nil {
		return err
	}
	c.done()
	return nil
}
