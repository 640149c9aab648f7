package main

import (
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/authz"
	"github.com/toolgate/toolgate/config"
	"github.com/toolgate/toolgate/config/clientfile"
	"github.com/toolgate/toolgate/gateway"
)

// importModel is the repository's model.conf (TestImportModelIsTheRepositoryModel keeps the copy
// equal): toolgate accepts only that model, so an import writes it as it is.
//
//go:embed import_model.conf
var importModel []byte

// importConfigFile is the name of the written config, the one serve and check look for by default.
const importConfigFile = "toolgate.yaml"

const importUsage = "usage: toolgate import [--out DIR] [--force] FILE"

func runImport(args []string) int { return importCommand(args, os.Stdout, os.Stderr) }

// importCommand reads a Claude Desktop, Cursor or VS Code MCP config and writes toolgate.yaml, policy.csv
// and model.conf for its servers into --out, then prints the client's entry that starts toolgate in
// their place. Exit status: 0 written, 1 the file cannot be imported or a file is in the way, 2 usage.
func importCommand(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("import", flag.ContinueOnError)
	fset.SetOutput(stderr)
	out := fset.String("out", ".", "directory to write toolgate.yaml, policy.csv and model.conf into")
	force := fset.Bool("force", false, "overwrite those files when they exist")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	// Flags may follow the file too: toolgate import claude_desktop_config.json --out ~/toolgate.
	var files []string
	for fset.NArg() > 0 {
		files = append(files, fset.Arg(0))
		if err := fset.Parse(fset.Args()[1:]); err != nil {
			return 2
		}
	}
	if len(files) != 1 {
		fmt.Fprintln(stderr, importUsage)
		return 2
	}
	src := files[0]
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "toolgate import: "+format+"\n", a...)
		return 1
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return fail("%v", err)
	}
	im, err := clientfile.Parse(src, data)
	if err != nil {
		return fail("%v", err)
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return fail("%v", err)
	}
	cfgPath := filepath.Join(dir, importConfigFile)
	files = []string{cfgPath, filepath.Join(dir, config.DefaultPolicyFile), filepath.Join(dir, config.DefaultModelFile)}
	contents := [][]byte{im.ConfigYAML(cfgPath), im.Policy(), importModel}
	if !*force {
		for _, f := range files {
			if _, err := os.Lstat(f); err == nil {
				return fail("%s exists; pass --force to overwrite it, or --out another directory", f)
			}
		}
	}
	// The config is checked before anything is written, as serve would load it: a value the client
	// accepts and toolgate does not (a ws:// url) stops the import here, nothing half written.
	cfg, err := config.Parse(cfgPath, contents[0], importEnv(im))
	if err != nil {
		return fail("toolgate would refuse the config imported from %s; change these servers in it, or leave them out, and import again:\n%v", src, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail("%v", err)
	}
	for i, f := range files {
		if err := writeNew(f, contents[i], *force); err != nil {
			return fail("%v", err)
		}
	}
	policy, err := authz.LoadPolicy(cfg.ModelPath(), cfg.PolicyPath(), gateway.PolicyOptions(cfg))
	if err != nil {
		return fail("the generated policy does not load (a bug in toolgate import, please report it):\n%v", err)
	}
	printImport(stdout, im, dir, cfgPath, policy.Warnings())
	return 0
}

// importEnv answers ${NAME} for the variables the import introduced, so that checking the generated
// config does not depend on the operator having set them yet.
func importEnv(im *clientfile.Import) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, v := range im.Vars {
			if v.Name == name {
				return "set-before-start", true
			}
		}
		if v, ok := os.LookupEnv(name); ok {
			return v, true
		}
		return "unset", true // HOME and the like: the operator's environment decides
	}
}

// writeNew creates path 0600; it refuses an existing file unless force, and then still leaves it 0600.
func writeNew(path string, data []byte, force bool) error {
	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if force {
		flags = os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("%s exists; pass --force to overwrite it, or --out another directory", path)
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// printImport tells what was written, what was left behind, what to set and what to paste.
func printImport(w io.Writer, im *clientfile.Import, dir, cfgPath string, policyWarnings []string) {
	fmt.Fprintf(w, "Imported %d server(s) from %s (%s):\n", len(im.Servers), im.File, im.Client)
	for _, s := range im.Servers {
		what := s.Command
		if s.Transport != "stdio" {
			what = s.URL
		}
		fmt.Fprintf(w, "  %-20s %-5s %s\n", s.Name, s.Transport, what)
	}
	fmt.Fprintf(w, "\nWrote (0600) in %s:\n  %s\n  %s\n  %s\n", dir, importConfigFile, config.DefaultPolicyFile, config.DefaultModelFile)
	if len(im.Warnings) > 0 || len(policyWarnings) > 0 {
		fmt.Fprintf(w, "\nNot carried over, or changed (also written as comments in %s):\n", importConfigFile)
		for _, x := range im.Warnings {
			fmt.Fprintf(w, "  warning: %s\n", x)
		}
		for _, x := range policyWarnings {
			fmt.Fprintf(w, "  warning: policy: %s\n", x)
		}
	}
	if len(im.Vars) > 0 {
		fmt.Fprintf(w, "\nSet these before starting toolgate (%s reads them as ${NAME}; no secret was written):\n", importConfigFile)
		for _, v := range im.Vars {
			fmt.Fprintf(w, "  export %s=...   # %s\n", v.Name, v.From)
		}
	}
	self, note := toolgateCommand()
	fmt.Fprintf(w, "\nIn %s, replace the imported servers with this entry (keep the file's other settings):\n\n%s", im.File, im.Snippet(self, cfgPath))
	if note != "" {
		fmt.Fprintf(w, "(%s)\n", note)
	}
	if len(im.Vars) > 0 {
		switch im.Client {
		case clientfile.VSCode, clientfile.VSCodeSettings:
			fmt.Fprintln(w, "(VS Code passes the variables in env to toolgate: from its inputs, prompted once, or from its environment.)")
		case clientfile.Cursor:
			fmt.Fprintln(w, "(Cursor fills in ${env:NAME} from the environment it was started in.)")
		default:
			fmt.Fprintln(w, "(Claude Desktop passes only the env given here: replace each <NAME> with its value, as the servers had them.)")
		}
	}
	fmt.Fprintf(w, "\nNext:\n  toolgate check --config %s      # starts each server once and lists its tools\n", cfgPath)
	fmt.Fprintf(w, "  toolgate tools --config %s --as %s\n", cfgPath, clientfile.StdioPrincipal)
	fmt.Fprintf(w, "  then narrow %s: it allows every tool of every imported server\n", filepath.Join(dir, config.DefaultPolicyFile))
}

// toolgateCommand is the path a client should start: this binary, unless it is a temporary `go run`
// build, which would be gone by the time the client starts it.
func toolgateCommand() (string, string) {
	self, err := os.Executable()
	if err != nil || strings.Contains(self, string(filepath.Separator)+"go-build") {
		return "toolgate", "put the absolute path of your toolgate binary in command: clients do not use your shell's PATH"
	}
	return self, ""
}
