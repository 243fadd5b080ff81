package main

import (
	"flag"
	"fmt"
	"strings"
)

// One rule names the environment: a flag --some-name is also the variable
// QUEEN_SOME_NAME, and the command line wins over it. Queen's own names
// are read too, so a Queen deployment's environment carries over (HOST and
// PORT for --http, LOG_LEVEL, JWT_* for authentication, which has no
// flags), as are the names earlier versions of this broker read. A value
// that does not parse names its variable, not a flag the user never typed.

// envAliases are the other names a flag is read from, after QUEEN_<FLAG>.
var envAliases = map[string][]string{
	"data":      {"QUEEN_DATA_DIR"},       // before the rule
	"raft":      {"QUEEN_RAFT_ADDR"},      // before the rule
	"advertise": {"QUEEN_ADVERTISE_HTTP"}, // before the rule
	"log-level": {"LOG_LEVEL"},            // Queen's name
}

// envName is the variable of the flag name.
func envName(name string) string {
	return "QUEEN_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseEnvFlags parses args into fs, then sets each flag of fromEnv (every
// flag when fromEnv is nil) that the command line left unset from its
// variable. Before parsing, each such flag's usage gains "(env NAME)", so
// -h lists the variables. A flag a command must never take from the
// environment (queen leave --node-id: the node's own id is in its
// environment) is left out of fromEnv.
func parseEnvFlags(fs *flag.FlagSet, args []string, getenv func(string) string, fromEnv ...string) error {
	reads := func(name string) bool {
		if fromEnv == nil {
			return true
		}
		for _, n := range fromEnv {
			if n == name {
				return true
			}
		}
		return false
	}
	fs.VisitAll(func(f *flag.Flag) {
		if reads(f.Name) {
			f.Usage += " (env " + strings.Join(append([]string{envName(f.Name)}, envAliases[f.Name]...), ", ") + ")"
		}
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || !reads(f.Name) {
			return
		}
		for _, name := range append([]string{envName(f.Name)}, envAliases[f.Name]...) {
			v := getenv(name)
			if v == "" {
				continue
			}
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("bad %s %q: %v", name, v, e)
			}
			return
		}
	})
	return err
}
