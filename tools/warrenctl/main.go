package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// verbs indexes every command by name.
var verbs = indexVerbs(
	[]*verb{statusVerb, clusterStatusVerb, forgetClusterNodeVerb},
	userVerbs,
	vhostVerbs,
	queueVerbs,
	connectionVerbs,
	definitionVerbs,
	superStreamVerbs,
	streamVerbs,
)

func indexVerbs(groups ...[]*verb) map[string]*verb {
	m := map[string]*verb{}
	for _, g := range groups {
		for _, v := range g {
			m[v.name] = v
		}
	}
	return m
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, Env{Stdin: os.Stdin, Getenv: os.Getenv})
	stop()
	os.Exit(code)
}
