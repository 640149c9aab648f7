package upstreams

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/pins"
	"github.com/toolgate/toolgate/sanitize"
	"github.com/toolgate/toolgate/toolschema"
	"github.com/toolgate/toolgate/upstreams/overrides"
)

// Tool is one catalog entry: everything the pipeline needs to decide on and
// run a call, fixed when the catalog is built.
type Tool struct {
	Name     string // client-facing: <prefix><upstream tool>, or the override's name
	ID       string // canonical <server>/<tool>, the Casbin object (the upstream's name, even when renamed)
	Server   string
	Upstream string // the tool's name on its server

	Title, Description string
	// The schemas as the upstream sent them, byte for byte, except that
	// description_scan: strip removes hidden characters from their title and
	// description strings. Input and Output are compiled from the
	// upstream's own bytes.
	InputSchema, OutputSchema []byte
	Annotations               mcp.ToolAnnotation

	Input  *toolschema.Schema // compiled input schema
	Output *toolschema.Schema // compiled output schema; nil when none declared

	Timeout        time.Duration
	MaxResultBytes int64

	// Unreachable marks a stand-in for a tool of a server that is down, so
	// its calls can answer upstream_unavailable; it has no schema.
	Unreachable bool
	// Guessed marks an Unreachable stand-in for a name the catalog never
	// saw (its server never listed its tools): Name, ID and Upstream come
	// from the client's string, so they are unbounded (no metric labels).
	Guessed bool
	// Changed marks a stand-in for a tool that pinning blocks: its
	// definition differs from the approved one, or (strict mode) it was
	// never approved. Its calls answer tool_changed with ChangeReason, a
	// sentence for the model; it has no schema and is never listed.
	Changed      bool
	ChangeReason string

	// Hash is the hash of the tool's definition as the upstream listed it
	// (see pins.Definition); "" without pinning.
	Hash string

	// Override is the operator's override of the tool, applied
	// (catalog_overrides.go): Name, Title, Description, Annotations,
	// InputSchema and Input are the client-facing ones, and validate adds
	// its fixed values to each call's arguments (Override.Inject). nil: the
	// tool as its server lists it.
	Override *overrides.Applied

	listed   Listed              // as the upstream sent it; only while the catalog is built
	override *overrides.Override // the override to apply; only while the catalog is built
}

// Quarantined is a listed tool the catalog refused, with the reason.
type Quarantined struct {
	Server, Upstream, Reason string
}

// Catalog is an immutable snapshot of every callable tool.
type Catalog struct {
	tools       []*Tool // sorted by Name
	byName      map[string]*Tool
	quarantined []Quarantined
	down        map[string]string // server -> why it has no tools
	prefixes    map[string]string // prefix -> server, for servers that are down
	renamed     renamedDown       // the overrides' names of tools of servers that are down

	changed       []ChangedTool // sorted by Name
	changedByName map[string]*ChangedTool
	findings      []Finding
	warnings      []string

	features *Features
}

// BuildOptions are what BuildWith needs beyond the listings.
type BuildOptions struct {
	// Pins checks every tool against its pin (see package pins); nil means
	// no pinning. The description scan needs no option: its mode is each
	// Server's DescriptionScan.
	Pins *pins.Store
	// Features are the servers' resources, templates and prompts as they
	// listed them; nil means none.
	Features map[string]*ServerFeatures
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// ReservedToolNames are the client-facing names of the gateway's own
// tools, the discovery meta-tools (package discovery): no upstream tool may
// claim one, or a client could not tell the two apart.
var ReservedToolNames = []string{"toolgate__search_tools", "toolgate__call_tool"}

// Build makes a catalog from what each connected server listed, taking the
// servers in the order given (an earlier server's resource URI or prompt
// name wins over a later one's). down maps servers that could not be
// reached to the reason. A server without a name, or a name given twice, is
// an error. A client-facing name claimed twice is never shadowed silently:
// every claimant is quarantined (an upstream chooses its tool names, so one
// hostile or careless upstream must not stop the gateway from starting),
// and `toolgate check` reports it.
func Build(servers []Server, listed map[string][]Listed, down map[string]string) (*Catalog, error) {
	return BuildWith(servers, listed, down, BuildOptions{})
}

// BuildWith is Build with pinning. After the checks Build makes (names,
// schemas, collisions), each remaining tool passes the description scan
// (scan.go) and then, with opts.Pins, its pin: a tool the scan quarantines
// is not pinned (a tofu store records only tools that will be callable);
// a tool that is Pending or Changed is kept out of the callable catalog,
// listed by Changed, and resolves to a Changed stand-in; a definition that
// cannot be pinned is quarantined. A pin that could not be written is a
// warning (Warnings), not an error: the tool stays callable and its pin is
// kept in memory.
func BuildWith(servers []Server, listed map[string][]Listed, down map[string]string, opts BuildOptions) (*Catalog, error) {
	if err := checkNames(servers); err != nil {
		return nil, err
	}
	c := &Catalog{byName: map[string]*Tool{}, down: map[string]string{}, prefixes: map[string]string{},
		changedByName: map[string]*ChangedTool{}}
	claims := map[string][]*Tool{}
	var order []string
	modes := make(map[string]ScanMode, len(servers))
	for i := range servers {
		srv := &servers[i]
		server := srv.Name
		modes[server] = srv.DescriptionScan
		if why, isDown := down[server]; isDown {
			c.down[server] = why
			if p := srv.ToolPrefix; p != "" {
				c.prefixes[p] = server
			}
			c.renamed.add(srv)
			continue
		}
		c.warnings = append(c.warnings, overridesOfUnlisted(srv, listed[server])...)
		for _, l := range listed[server] {
			t, reason := entry(srv, l)
			if reason != "" {
				c.quarantine(server, l.Name, reason)
				continue
			}
			if len(claims[t.Name]) == 0 {
				order = append(order, t.Name)
			}
			claims[t.Name] = append(claims[t.Name], t)
		}
	}
	var admitted []*Tool
	for _, name := range order {
		admitted = c.admit(admitted, claims[name])
	}
	admitted = c.scan(modes, admitted, claims)
	admitted = c.applyOverrides(admitted)
	c.pin(admitted, opts.Pins)
	c.features = buildFeatures(servers, opts.Features)
	c.warnings = append(c.warnings, c.features.Warnings()...)
	sort.Slice(c.tools, func(i, j int) bool { return c.tools[i].Name < c.tools[j].Name })
	sort.Slice(c.changed, func(i, j int) bool { return c.changed[i].Name < c.changed[j].Name })
	for i := range c.changed {
		c.changedByName[c.changed[i].Name] = &c.changed[i]
	}
	return c, nil
}

// admit keeps the one tool claiming a name for the scan and the pin check,
// or quarantines every claimant.
func (c *Catalog) admit(admitted []*Tool, claimants []*Tool) []*Tool {
	if len(claimants) == 1 {
		return append(admitted, claimants[0])
	}
	ids := make([]string, len(claimants))
	for i, t := range claimants {
		ids[i] = t.ID
	}
	fix := "give the servers distinct prefixes"
	for _, t := range claimants {
		if t.override != nil && t.override.Name != "" {
			fix = "give the tools distinct names (mcpServers.<server>.tools.<tool>.override.name)"
		}
	}
	for _, t := range claimants {
		c.quarantine(t.Server, t.Upstream, fmt.Sprintf("client-facing name %q is claimed by %s; %s",
			t.Name, strings.Join(ids, " and "), fix))
	}
	return admitted
}

func (c *Catalog) quarantine(server, tool, reason string) {
	c.quarantined = append(c.quarantined, Quarantined{Server: server, Upstream: sanitize.Text(tool), Reason: sanitize.Text(reason)})
}

// entry builds one catalog entry, or says why the tool is quarantined.
func entry(srv *Server, l Listed) (*Tool, string) {
	name := srv.ToolPrefix + l.Name
	ov := srv.Overrides[l.Name]
	if ov != nil && ov.Name != "" {
		name = ov.Name // verbatim: the operator chose the whole name
	}
	if !validName.MatchString(l.Name) || !validName.MatchString(name) {
		return nil, fmt.Sprintf("name %q: client-facing name %q must match [A-Za-z0-9_-]{1,64}", l.Name, name)
	}
	if slices.Contains(ReservedToolNames, name) {
		return nil, fmt.Sprintf("client-facing name %q is the gateway's own discovery tool; give the server another prefix or the tool an override name", name)
	}
	in, err := toolschema.Compile(l.InputSchema, toolschema.Limits{})
	if err != nil {
		return nil, "input schema: " + err.Error()
	}
	t := &Tool{
		Name: name, ID: srv.Name + "/" + l.Name, Server: srv.Name, Upstream: l.Name,
		Title: sanitize.Text(l.Title), Description: sanitize.Text(l.Description),
		InputSchema: l.InputSchema, OutputSchema: l.OutputSchema, Annotations: l.annotations(),
		Input:          in,
		Timeout:        srv.callTimeout(l.Name),
		MaxResultBytes: srv.maxResultBytes(l.Name),
		listed:         l,
		override:       ov,
	}
	if len(l.OutputSchema) > 0 && string(l.OutputSchema) != "null" {
		if t.Output, err = toolschema.Compile(l.OutputSchema, toolschema.Limits{}); err != nil {
			return nil, "output schema: " + err.Error()
		}
	}
	return t, ""
}

// Tools returns every callable tool, sorted by name. Do not modify.
func (c *Catalog) Tools() []*Tool { return c.tools }

// Features are the resources, templates and prompts of every server.
func (c *Catalog) Features() *Features {
	if c.features == nil {
		return noFeatures // a catalog not built by BuildWith
	}
	return c.features
}

var noFeatures = buildFeatures(nil, nil)

// Quarantined returns the refused tools.
func (c *Catalog) Quarantined() []Quarantined { return c.quarantined }

// Down returns the servers that have no tools because they are not
// connected, with the reason.
func (c *Catalog) Down() map[string]string { return c.down }

// Resolve finds the tool a client-facing name refers to. A name under the
// prefix of a server that is down resolves to an Unreachable stand-in, so
// the caller learns the server is unavailable rather than that the tool
// does not exist. A tool that pinning blocks resolves to a Changed
// stand-in, so the caller can answer tool_changed.
func (c *Catalog) Resolve(name string) (*Tool, bool) {
	if t, ok := c.byName[name]; ok {
		return t, true
	}
	if ch, ok := c.changedByName[name]; ok {
		return &Tool{Name: ch.Name, ID: ch.ID, Server: ch.Server, Upstream: ch.Upstream,
			Changed: true, ChangeReason: ch.Reason(), Hash: ch.NewHash}, true
	}
	if t, ok := c.renamed.resolve(name); ok {
		return t, true
	}
	for prefix, server := range c.prefixes {
		if rest, ok := strings.CutPrefix(name, prefix); ok && validName.MatchString(rest) && !c.renamed.away(server, rest) {
			return &Tool{Name: name, ID: server + "/" + rest, Server: server, Upstream: rest, Unreachable: true, Guessed: true}, true
		}
	}
	return nil, false
}
