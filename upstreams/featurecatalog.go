package upstreams

import (
	"fmt"
	"slices"
	"sort"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/toolgate/toolgate/sanitize"
)

// Resource is a resource as clients see it: its name carries the server's
// prefix like a tool's; its URI is the upstream's, unchanged (URIs are the
// upstream's identifiers and appear in its tool results too).
type Resource struct {
	Server   string
	ID       string // "<server>/<uri>", the Casbin object for the read action
	Resource mcp.Resource
}

// Template is a resource template as clients see it.
type Template struct {
	Server   string
	ID       string // "<server>/<uri template>", the object its listing is checked against
	Template mcp.ResourceTemplate
}

// Prompt is a prompt as clients see it: named <prefix><upstream name>.
type Prompt struct {
	Server   string
	ID       string // "<server>/<upstream name>", the Casbin object for the get action
	Upstream string // the prompt's name on its server
	Prompt   mcp.Prompt
}

// Features is the immutable snapshot of every server's resources,
// templates and prompts, and what each server supports of subscriptions,
// logging and completions.
type Features struct {
	resources []*Resource // sorted by URI
	byURI     map[string]*Resource
	templates []*Template
	prompts   []*Prompt // sorted by client-facing name
	byPrompt  map[string]*Prompt
	servers   map[string]ServerFeatures // lists cleared: capabilities only
	warnings  []string
}

// buildFeatures names everything for clients. Servers are taken in the
// order given: a URI or prompt name that an earlier server already claims is
// dropped, with a warning (give the servers distinct prefixes).
func buildFeatures(servers []Server, listed map[string]*ServerFeatures) *Features {
	f := &Features{byURI: map[string]*Resource{}, byPrompt: map[string]*Prompt{}, servers: map[string]ServerFeatures{}}
	for i := range servers {
		server := servers[i].Name
		sf := listed[server]
		if sf == nil {
			continue
		}
		prefix := servers[i].ToolPrefix
		f.servers[server] = ServerFeatures{HasResources: sf.HasResources, Subscribe: sf.Subscribe, Logging: sf.Logging, Completions: sf.Completions}
		for _, r := range sf.Resources {
			f.addResource(server, prefix, r)
		}
		for _, t := range sf.Templates {
			f.addTemplate(server, prefix, t)
		}
		for _, p := range sf.Prompts {
			f.addPrompt(server, prefix, p)
		}
	}
	sort.Slice(f.resources, func(i, j int) bool { return f.resources[i].Resource.URI < f.resources[j].Resource.URI })
	sort.Slice(f.prompts, func(i, j int) bool { return f.prompts[i].Prompt.Name < f.prompts[j].Prompt.Name })
	return f
}

func (f *Features) addResource(server, prefix string, r mcp.Resource) {
	if r.URI == "" {
		return
	}
	if prev, taken := f.byURI[r.URI]; taken {
		f.warnings = append(f.warnings, fmt.Sprintf("resource %q of server %s is hidden: server %s lists the same URI", sanitize.Clip(r.URI, 200), server, prev.Server))
		return
	}
	r.Name = prefix + sanitize.Text(r.Name)
	r.Title, r.Description = sanitize.Text(r.Title), sanitize.Text(r.Description)
	e := &Resource{Server: server, ID: server + "/" + r.URI, Resource: r}
	f.byURI[r.URI] = e
	f.resources = append(f.resources, e)
}

func (f *Features) addTemplate(server, prefix string, t mcp.ResourceTemplate) {
	if t.URITemplate == nil || t.URITemplate.Template == nil {
		return
	}
	raw := t.URITemplate.Raw()
	if prev, taken := f.TemplateOwner(raw); taken {
		// mcp-go keys templates by their text: one server per text.
		f.warnings = append(f.warnings, fmt.Sprintf("resource template %q of server %s is hidden: server %s offers the same template", sanitize.Clip(raw, 200), server, prev))
		return
	}
	t.Name = prefix + sanitize.Text(t.Name)
	t.Title, t.Description = sanitize.Text(t.Title), sanitize.Text(t.Description)
	f.templates = append(f.templates, &Template{Server: server, ID: server + "/" + raw, Template: t})
}

func (f *Features) addPrompt(server, prefix string, p mcp.Prompt) {
	if p.Name == "" {
		return
	}
	name := prefix + p.Name
	if prev, taken := f.byPrompt[name]; taken {
		f.warnings = append(f.warnings, fmt.Sprintf("prompt %q of server %s is hidden: server %s offers the same name", sanitize.Clip(name, 200), server, prev.Server))
		return
	}
	e := &Prompt{Server: server, ID: server + "/" + p.Name, Upstream: p.Name}
	p.Name = name
	p.Title, p.Description = sanitize.Text(p.Title), sanitize.Text(p.Description)
	p.Arguments = slices.Clone(p.Arguments) // the listing is shared with earlier catalogs: never write into it
	for i := range p.Arguments {
		p.Arguments[i].Description = sanitize.Text(p.Arguments[i].Description)
	}
	e.Prompt = p
	f.byPrompt[name] = e
	f.prompts = append(f.prompts, e)
}

// Resources are the listed resources, by URI.
func (f *Features) Resources() []*Resource { return f.resources }

// Templates are the resource templates, in server order.
func (f *Features) Templates() []*Template { return f.templates }

// Prompts are the prompts, by client-facing name.
func (f *Features) Prompts() []*Prompt { return f.prompts }

// Resource finds a listed resource by URI.
func (f *Features) Resource(uri string) (*Resource, bool) {
	r, ok := f.byURI[uri]
	return r, ok
}

// Prompt finds a prompt by its client-facing name.
func (f *Features) Prompt(name string) (*Prompt, bool) {
	p, ok := f.byPrompt[name]
	return p, ok
}

// Server says what server supports (its lists are empty here).
func (f *Features) Server(server string) (ServerFeatures, bool) {
	s, ok := f.servers[server]
	return s, ok
}

// Warnings are the names and URIs hidden because two servers claim them.
func (f *Features) Warnings() []string { return f.warnings }

// Owner is the server a URI belongs to: the one that lists it, else the
// first (in config order) with a template that matches it, else the only
// server that offers resources at all (servers may accept URIs they do not
// list; with several candidates the gateway cannot tell, and says no).
func (f *Features) Owner(uri string) (server string, ok bool) {
	if r, ok := f.byURI[uri]; ok {
		return r.Server, true
	}
	for _, t := range f.templates {
		if t.Template.URITemplate.Regexp().MatchString(uri) {
			return t.Server, true
		}
	}
	for name, sf := range f.servers {
		if sf.HasResources {
			if server != "" {
				return "", false
			}
			server = name
		}
	}
	return server, server != ""
}

// TemplateOwner is the server whose template is exactly raw.
func (f *Features) TemplateOwner(raw string) (server string, ok bool) {
	for _, t := range f.templates {
		if t.Template.URITemplate.Raw() == raw {
			return t.Server, true
		}
	}
	return "", false
}
