package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Env is what run takes from the process besides its arguments and output.
// The zero Env reads no environment and has an empty stdin.
type Env struct {
	Stdin io.Reader // import_definitions -, add_user without a password
	// Getenv reads WARRENCTL_URL, WARRENCTL_USER and WARRENCTL_PASSWORD,
	// the defaults for --url, --user and --password; nil reads nothing.
	Getenv func(string) string
	// Transport carries the HTTP requests; nil uses a fresh clone of
	// http.DefaultTransport, closed when run returns.
	Transport http.RoundTripper
}

// Defaults for the global options.
const (
	defaultURL      = "http://localhost:15672"
	defaultUser     = "guest"
	defaultPassword = "guest"
	defaultVhost    = "/"
	defaultTimeout  = 60 * time.Second
)

// opt is an option a verb (or every verb) accepts.
type opt struct {
	name  string // long name without dashes: "if-empty"
	short string // one letter without the dash, or ""
	value bool   // takes a value (--vhost v); otherwise a switch
}

// globalOpts are accepted before or after the verb.
var globalOpts = []opt{
	{name: "url", value: true},
	{name: "user", value: true},
	{name: "username", value: true},
	{name: "password", value: true},
	{name: "vhost", short: "p", value: true},
	{name: "formatter", value: true},
	{name: "timeout", short: "t", value: true},
	{name: "quiet", short: "q"},
	{name: "silent", short: "s"},
	{name: "no-table-headers"},
	{name: "help", short: "?"},
}

// verb is one command.
type verb struct {
	name    string
	usage   string // arguments and options after the verb's name
	summary string
	min     int // positional arguments
	max     int // -1: no limit
	opts    []opt
	columns []column // list verbs: the columns a user may ask for
	run     func(c *cmd) error
}

// cmd is one invocation of a verb.
type cmd struct {
	ctx  context.Context
	verb *verb
	args []string          // positional arguments
	opts map[string]string // the verb's own options that were given

	vhost     string
	json      bool
	quiet     bool // no informational lines
	silent    bool // no informational lines, no table header
	noHeaders bool
	timeout   time.Duration

	api   *client
	out   io.Writer
	stdin io.Reader
}

// banner prints an informational line: rabbitmqctl's "Listing queues for
// vhost / ...". -q, -s and --formatter json drop it.
func (c *cmd) banner(format string, a ...any) {
	if c.quiet || c.silent || c.json {
		return
	}
	fmt.Fprintf(c.out, format+"\n", a...)
}

// printf writes to standard output.
func (c *cmd) printf(format string, a ...any) {
	fmt.Fprintf(c.out, format, a...)
}

// done reports the success of a verb that prints no result: nothing, or
// {"result":"ok"} with --formatter json.
func (c *cmd) done() {
	if c.json {
		fmt.Fprintln(c.out, `{"result":"ok"}`)
	}
}

// has reports whether the verb's switch or option was given.
func (c *cmd) has(name string) bool {
	_, ok := c.opts[name]
	return ok
}

// run executes one warrenctl command line and returns its exit code. It
// writes results to stdout and errors to stderr and never calls os.Exit, so
// tests (and end-to-end tests against a Warren server) call it directly:
//
//	run(ctx, []string{"--url", srv.URL, "list_queues", "name"}, &out, &errOut, Env{})
func run(ctx context.Context, args []string, stdout, stderr io.Writer, env Env) int {
	out := bufio.NewWriter(stdout)
	defer out.Flush()

	p, err := parseArgs(args)
	if err == nil {
		switch {
		case p.verb == nil && (p.help || p.verbName == "help"):
			printHelp(out, p.args)
			return exitOK
		case p.verb == nil:
			printHelp(stderr, nil)
			return exitUsage
		case p.help:
			printVerbHelp(out, p.verb)
			return exitOK
		}
		err = execute(ctx, p, out, env)
	}
	if err == nil {
		return exitOK
	}
	out.Flush() // what the verb printed goes before the error
	var ue *usageError
	if errors.As(err, &ue) {
		printUsageError(stderr, args, p.verb, ue.msg)
		return exitUsage
	}
	fmt.Fprintf(stderr, "Error:\n%v\n", err)
	return exitCodeOf(err)
}

// execute runs a parsed command line's verb under the -t deadline.
func execute(ctx context.Context, p parsed, out io.Writer, env Env) error {
	c := &cmd{
		verb:      p.verb,
		args:      p.args,
		opts:      p.opts,
		vhost:     defaultVhost,
		quiet:     p.has("quiet"),
		silent:    p.has("silent"),
		noHeaders: p.has("no-table-headers"),
		timeout:   defaultTimeout,
		out:       out,
		stdin:     env.Stdin,
	}
	if c.stdin == nil {
		c.stdin = strings.NewReader("")
	}
	if v, ok := p.global["vhost"]; ok {
		c.vhost = v
	}
	rt := env.Transport
	if rt == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		defer t.CloseIdleConnections()
		rt = t
	}
	if err := c.setup(p, env.Getenv, rt); err != nil {
		return err
	}
	var cancel context.CancelFunc
	c.ctx, cancel = context.WithTimeout(ctx, c.timeout)
	defer cancel()
	return p.verb.run(c)
}

// setup checks the global options and builds the HTTP client. An option
// wins over its WARRENCTL_ variable, which wins over the default.
func (c *cmd) setup(p parsed, getenv func(string) string, rt http.RoundTripper) error {
	setting := func(name, envName, def string) string {
		if v, ok := p.global[name]; ok {
			return v
		}
		if getenv != nil {
			if v := getenv(envName); v != "" {
				return v
			}
		}
		return def
	}
	base := setting("url", "WARRENCTL_URL", defaultURL)
	user := setting("user", "WARRENCTL_USER", defaultUser)
	if v, ok := p.global["username"]; ok {
		user = v
	}
	password := setting("password", "WARRENCTL_PASSWORD", defaultPassword)

	switch f := p.global["formatter"]; f {
	case "", "table":
	case "json":
		c.json = true
	default:
		return usagef("unsupported formatter %q: use table or json", f)
	}
	if v, ok := p.global["timeout"]; ok {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs <= 0 {
			return usagef("invalid --timeout %q: a positive number of seconds", v)
		}
		c.timeout = time.Duration(secs * float64(time.Second))
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return usagef("invalid --url %q: want http://host:port or https://host:port", base)
	}
	c.api = &client{
		base:     strings.TrimRight(base, "/"),
		user:     user,
		password: password,
		hc:       &http.Client{Transport: rt},
		timeout:  c.timeout,
		verb:     c.verb.name,
	}
	return nil
}

// parsed is a command line split into its parts.
type parsed struct {
	verbName string
	verb     *verb
	args     []string
	global   map[string]string
	opts     map[string]string
	help     bool
}

func (p parsed) has(name string) bool {
	_, ok := p.global[name]
	return ok
}

// parseArgs splits a command line the way rabbitmqctl does: options may come
// before or after the verb and between its arguments; "--" ends options;
// "-" alone is an argument.
func parseArgs(args []string) (parsed, error) {
	p := parsed{global: map[string]string{}, opts: map[string]string{}}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			p.args = append(p.args, args[i+1:]...)
			break
		}
		// "-" (stdin/stdout) and negative numbers are arguments.
		if len(a) < 2 || a[0] != '-' || (a[1] >= '0' && a[1] <= '9') {
			if p.verbName == "" {
				p.verbName = a
				p.verb = verbs[a]
				if p.verb == nil && a != "help" {
					return p, failf(exitUsage, "command '%s' not found; 'warrenctl help' lists the commands", a)
				}
			} else {
				p.args = append(p.args, a)
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		long := strings.HasPrefix(a, "--")
		o := lookupOpt(globalOpts, name, long)
		global := o != nil
		if o == nil && p.verb != nil {
			o = lookupOpt(p.verb.opts, name, long)
		}
		if o == nil {
			return p, usagef("invalid option %s", a)
		}
		switch {
		case o.value && !hasValue:
			if i+1 >= len(args) {
				return p, usagef("option %s needs a value", a)
			}
			i++
			value = args[i]
		case !o.value && hasValue:
			if value != "true" && value != "false" {
				return p, usagef("option %s takes no value", a)
			}
			if value == "false" {
				continue
			}
			value = ""
		}
		if o.name == "help" {
			p.help = true
			continue
		}
		if global {
			p.global[o.name] = value
		} else {
			p.opts[o.name] = value
		}
	}
	if p.verb != nil && !p.help {
		n := len(p.args)
		if n < p.verb.min {
			return p, usagef("not enough arguments.")
		}
		if p.verb.max >= 0 && n > p.verb.max {
			return p, usagef("too many arguments.")
		}
	}
	return p, nil
}

// lookupOpt finds an option by long name (--name) or short letter (-x).
func lookupOpt(opts []opt, name string, long bool) *opt {
	for i := range opts {
		o := &opts[i]
		if (long && o.name == name) || (!long && o.short != "" && o.short == name) {
			return o
		}
	}
	return nil
}

const globalUsage = "warrenctl [--url <url>] [--user <user>] [--password <password>] [--vhost|-p <vhost>] [--formatter table|json] [--quiet|-q] [--silent|-s] [--no-table-headers] [--timeout|-t <seconds>]"

// printUsageError prints a usage mistake the way rabbitmqctl does.
func printUsageError(w io.Writer, args []string, v *verb, msg string) {
	fmt.Fprintf(w, "Error (argument validation): %s\nArguments given:\n\t%s\n\n", msg, strings.Join(args, " "))
	if v != nil {
		fmt.Fprintf(w, "Usage\n\n%s\n", verbUsage(v))
	} else {
		fmt.Fprintf(w, "Usage\n\n%s <command> [<command options>]\n", globalUsage)
	}
}

// printHelp lists the verbs, or describes one (help VERB).
func printHelp(w io.Writer, args []string) {
	if len(args) > 0 {
		if v := verbs[args[0]]; v != nil {
			printVerbHelp(w, v)
			return
		}
	}
	fmt.Fprintf(w, "Usage\n\n%s <command> [<command options>]\n\nAvailable commands:\n\n", globalUsage)
	names := make([]string, 0, len(verbs))
	for n := range verbs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "   %-28s %s\n", n, verbs[n].summary)
	}
	fmt.Fprint(w, "\nUse 'warrenctl help <command>' to learn more about a specific command\n")
}

func verbUsage(v *verb) string {
	return strings.TrimSpace("warrenctl [global options] " + v.name + " " + v.usage)
}

func printVerbHelp(w io.Writer, v *verb) {
	fmt.Fprintf(w, "Usage\n\n%s\n\n%s\n", verbUsage(v), v.summary)
	if len(v.columns) > 0 {
		names := make([]string, len(v.columns))
		for i, c := range v.columns {
			names[i] = c.name
		}
		sort.Strings(names)
		fmt.Fprintf(w, "\n<column> must be one of %s\n", strings.Join(names, ", "))
	}
	fmt.Fprintf(w, "\nGlobal options\n\n%s\n", globalUsage)
}
