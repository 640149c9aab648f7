package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// Everything an upstream offers besides tools passes through toolgate:
// resources, templates, subscriptions, prompts, completions, logging, and
// the upstream's own requests (sampling, elicitation, roots) relayed to the
// client whose call caused them. The upstream is npm
// @modelcontextprotocol/server-everything over stdio; the client is
// mcp-go's, over Streamable HTTP, in both protocol eras.

// everythingServer is the config entry for server-everything, or skips.
func everythingServer(t *testing.T) string {
	t.Helper()
	bin, _ := filepath.Abs("../../e2e/ts/node_modules/.bin/mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("TOOLGATE_REQUIRE_NODE") == "1" {
			t.Fatalf("server-everything not installed: %v", err)
		}
		t.Skip("server-everything not installed: run npm install in e2e/ts")
	}
	return fmt.Sprintf("  everything:\n    command: %q\n    args: [stdio]\n    init_timeout: 30s\n", bin)
}

// clientAnswers is a client that can be asked for sampling, elicitation
// and roots, and records that it was.
type clientAnswers struct{ asked chan string }

func (a *clientAnswers) CreateMessage(_ context.Context, req mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
	if len(req.Messages) == 0 {
		return nil, fmt.Errorf("sampling request without messages")
	}
	a.asked <- "sampling"
	return &mcp.CreateMessageResult{
		SamplingMessage: mcp.SamplingMessage{Role: mcp.RoleAssistant, Content: mcp.NewTextContent("sampled answer 42")},
		Model:           "test-model",
	}, nil
}

func (a *clientAnswers) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.asked <- "elicitation"
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
}

func (a *clientAnswers) ListRoots(_ context.Context, _ mcp.ListRootsRequest) (*mcp.ListRootsResult, error) {
	a.asked <- "roots"
	return &mcp.ListRootsResult{Roots: []mcp.Root{{URI: "file:///tmp/toolgate-root", Name: "the-test-root"}}}, nil
}

// connectVersion is connectHTTP for a given protocol version, with the
// client able to answer sampling, elicitation and roots.
func connectVersion(t *testing.T, url, key, version string, answers *clientAnswers) *client.Client {
	t.Helper()
	// The gateway's requests to the client (sampling, elicitation, roots)
	// come on the call's own POST stream from the fast path, and on the
	// client's GET listening stream from mcp-go's server: open it.
	// (2026-07-28 has no listening stream: those requests come back as
	// input_required results instead.)
	trOpts := []transport.StreamableHTTPCOption{
		transport.WithHTTPBasicClient(ownHTTPClient(t)), // see ownHTTPClient
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + key}),
	}
	if !mcp.IsModernProtocol(version) {
		trOpts = append(trOpts, transport.WithContinuousListening())
	}
	tr, err := transport.NewStreamableHTTP(url, trOpts...)
	if err != nil {
		t.Fatal(err)
	}
	var opts []client.ClientOption
	if answers != nil {
		opts = append(opts, client.WithSamplingHandler(answers), client.WithElicitationHandler(answers), client.WithRootsHandler(answers))
	}
	c := initClientVersion(t, client.NewClient(tr, append(opts, client.WithProtocolVersion(version))...), version)
	if got := c.ProtocolVersion(); got != version {
		t.Fatalf("negotiated protocol %s, want %s", got, version)
	}
	return c
}

var protocolEras = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", mcp.LATEST_PROTOCOL_VERSION}

func TestResourcesAndPromptsPassThrough(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, everythingServer(t)))
	for _, version := range protocolEras {
		t.Run(version, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c := connectVersion(t, url, aliceKey, version, nil)

			res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
			if err != nil || len(res.Resources) == 0 {
				t.Fatalf("resources/list: %v, %d resources", err, len(res.Resources))
			}
			first := res.Resources[0]
			if !strings.HasPrefix(first.Name, "everything__") {
				t.Errorf("resource name %q lacks the server's prefix", first.Name)
			}
			read := mcp.ReadResourceRequest{}
			read.Params.URI = first.URI
			got, err := c.ReadResource(ctx, read)
			if err != nil || len(got.Contents) == 0 {
				t.Fatalf("resources/read %s: %v %+v", first.URI, err, got)
			}

			tmpls, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
			if err != nil || len(tmpls.ResourceTemplates) == 0 {
				t.Fatalf("resources/templates/list: %v %+v", err, tmpls)
			}
			read.Params.URI = "demo://resource/dynamic/text/7"
			got, err = c.ReadResource(ctx, read)
			if err != nil || len(got.Contents) == 0 {
				t.Fatalf("read through a template: %v %+v", err, got)
			}
			if tc, ok := got.Contents[0].(mcp.TextResourceContents); !ok || !strings.Contains(tc.Text, "7") {
				t.Errorf("template read: %#v", got.Contents[0])
			}

			prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
			if err != nil || !hasPrompt(prompts.Prompts, "everything__args-prompt") {
				t.Fatalf("prompts/list: %v %+v", err, prompts)
			}
			get := mcp.GetPromptRequest{}
			get.Params.Name = "everything__args-prompt"
			get.Params.Arguments = map[string]string{"city": "Kyiv"}
			p, err := c.GetPrompt(ctx, get)
			if err != nil || len(p.Messages) == 0 {
				t.Fatalf("prompts/get: %v %+v", err, p)
			}
			if tc, ok := p.Messages[0].Content.(mcp.TextContent); !ok || !strings.Contains(tc.Text, "Kyiv") {
				t.Errorf("prompt message %#v lacks the argument", p.Messages[0].Content)
			}

			comp := mcp.CompleteRequest{}
			comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "everything__completable-prompt"}
			comp.Params.Argument.Name, comp.Params.Argument.Value = "department", "Eng"
			cres, err := c.Complete(ctx, comp)
			if err != nil || len(cres.Completion.Values) != 1 || cres.Completion.Values[0] != "Engineering" {
				t.Fatalf("completion/complete: %v %+v", err, cres)
			}
			if err := c.Ping(ctx); err != nil {
				t.Errorf("ping: %v", err)
			}
		})
	}
}

func hasPrompt(ps []mcp.Prompt, name string) bool {
	for _, p := range ps {
		if p.Name == name {
			return true
		}
	}
	return false
}

// Default deny holds for resources and prompts: bob's role has no read or
// get lines, so his lists are empty and a direct read, get, subscription
// or completion is refused without a word of the policy.
func TestResourcesAndPromptsDefaultDeny(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, everythingServer(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := connectVersion(t, url, bobKey, "2025-11-25", nil)
	res, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil || len(res.Resources) != 0 {
		t.Fatalf("bob lists %d resources (%v), want none", len(res.Resources), err)
	}
	tmpls, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
	if err != nil || len(tmpls.ResourceTemplates) != 0 {
		t.Fatalf("bob lists %d templates (%v), want none", len(tmpls.ResourceTemplates), err)
	}
	prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil || len(prompts.Prompts) != 0 {
		t.Fatalf("bob lists %d prompts (%v), want none", len(prompts.Prompts), err)
	}
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "demo://resource/dynamic/text/1"
	_, err = c.ReadResource(ctx, read)
	if err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("bob's read: %v, want not allowed", err)
	}
	if strings.Contains(fmt.Sprint(err), "policy.csv") {
		t.Errorf("the refusal leaks the policy: %v", err)
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "everything__simple-prompt"
	if _, err := c.GetPrompt(ctx, get); err == nil {
		t.Error("bob got a prompt")
	}
	comp := mcp.CompleteRequest{}
	comp.Params.Ref = mcp.PromptReference{Type: "ref/prompt", Name: "everything__completable-prompt"}
	comp.Params.Argument.Name, comp.Params.Argument.Value = "department", "Eng"
	if _, err := c.Complete(ctx, comp); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("bob's completion: %v, want not allowed", err)
	}
	if err := subscribe(ctx, c, "demo://resource/dynamic/text/1"); err == nil || !strings.Contains(err.Error(), "not allowed") {
		t.Errorf("bob's subscription: %v, want not allowed", err)
	}
}

// subscribe sends resources/subscribe (mcp-go's client has no method).
func subscribe(ctx context.Context, c *client.Client, uri string) error {
	resp, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: mcp.NewRequestId("sub-" + uri), Method: string(mcp.MethodResourcesSubscribe),
		Params: map[string]string{"uri": uri},
	})
	if err != nil {
		return err
	}
	if resp.Error != nil {
		return fmt.Errorf("%d: %s", resp.Error.Code, resp.Error.Message)
	}
	return nil
}

// The upstream's sampling and elicitation requests made during a
// call reach the client that made the call, and its answers go back.
func TestServerRequestsRelayedToCaller(t *testing.T) {
	url, logs := httpGateway(t, writeConfig(t, everythingServer(t)))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	for _, version := range protocolEras {
		t.Run(version, func(t *testing.T) {
			answers := &clientAnswers{asked: make(chan string, 8)}
			c := connectVersion(t, url, aliceKey, version, answers)
			cases := []struct{ tool, args, asked, inData string }{
				{"everything__trigger-sampling-request", `{"prompt":"hi","maxTokens":10}`, "sampling", "sampled answer 42"},
				{"everything__trigger-elicitation-request", `{}`, "elicitation", "decline"},
			}
			// server-everything may also ask for roots on its own, during
			// whichever call is in flight: what counts is that each call's
			// request reached this client before the call returned.
			seen := map[string]bool{}
			for _, tc := range cases {
				res, env := callE2E(t, c, tc.tool, tc.args)
				if env["ok"] != true {
					t.Fatalf("%s: %v", tc.tool, env)
				}
				for drained := false; !drained; {
					select {
					case got := <-answers.asked:
						seen[got] = true
					default:
						drained = true
					}
				}
				if !seen[tc.asked] {
					t.Errorf("%s: the client was never asked for %s (asked: %v)", tc.tool, tc.asked, seen)
				}
				if !strings.Contains(strings.ToLower(fmt.Sprint(env["data"], res.Content)), tc.inData) {
					t.Errorf("%s: result %v lacks %q", tc.tool, env["data"], tc.inData)
				}
			}
		})
	}
}

// The upstream's roots/list reaches the client whose call is in flight,
// and the client's roots go back. server-everything asks once per
// upstream connection, 350 ms after it connects (whichever call is in
// flight then is the one relayed; with none, toolgate refuses and it asks
// again during get-roots-list), and caches the answer: so a gateway of
// its own, with this client's call the only one, makes the asking
// deterministic.
func TestRootsRelayedToCaller(t *testing.T) {
	url, logs := httpGateway(t, writeConfig(t, everythingServer(t)))
	defer func() {
		if t.Failed() {
			t.Log(logs)
		}
	}()
	answers := &clientAnswers{asked: make(chan string, 8)}
	c := connectVersion(t, url, aliceKey, "2025-06-18", answers)
	res, env := callE2E(t, c, "everything__get-roots-list", `{}`)
	if env["ok"] != true {
		t.Fatalf("get-roots-list: %v", env)
	}
	select {
	case got := <-answers.asked:
		if got != "roots" {
			t.Errorf("the client was asked for %s, want roots", got)
		}
	default:
		t.Error("the client was never asked for roots")
	}
	if !strings.Contains(strings.ToLower(fmt.Sprint(env["data"], res.Content)), "the-test-root") {
		t.Errorf("result %v lacks the client's root", env["data"])
	}
}

// Subscriptions: the gateway subscribes upstream for the client, and the
// upstream's notifications/resources/updated reach it. Log messages the
// upstream sends during a call reach the client at the level it set.
func TestSubscriptionAndLogging(t *testing.T) {
	url, _ := httpGateway(t, writeConfig(t, everythingServer(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	c := connectVersion(t, url, aliceKey, "2025-11-25", nil)
	got := make(chan mcp.JSONRPCNotification, 64)
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		select {
		case got <- n:
		default:
		}
	})
	if err := c.SetLevel(ctx, mcp.SetLevelRequest{Params: mcp.SetLevelParams{Level: mcp.LoggingLevelDebug}}); err != nil {
		t.Fatalf("logging/setLevel: %v", err)
	}
	uri := "demo://resource/dynamic/text/3"
	if err := subscribe(ctx, c, uri); err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	// The upstream logs the subscription it received from the gateway.
	waitNotification(t, ctx, got, "notifications/message", "Received Subscribe Resource request")
	// The upstream logs the subscription; then it sends updates every 5 s
	// once toggled on.
	if _, env := callE2E(t, c, "everything__toggle-subscriber-updates", `{}`); env["ok"] != true {
		t.Fatalf("toggle-subscriber-updates: %v", env)
	}
	waitNotification(t, ctx, got, "notifications/resources/updated", uri)
}

func waitNotification(t *testing.T, ctx context.Context, got <-chan mcp.JSONRPCNotification, method, contains string) {
	t.Helper()
	for {
		select {
		case n := <-got:
			params, _ := json.Marshal(n.Params)
			if n.Method == method && strings.Contains(string(params), contains) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no %s mentioning %q arrived", method, contains)
		}
	}
}

// The same relay serves a client of `toolgate serve --stdio`.
func TestResourcesAndPromptsOverStdio(t *testing.T) {
	c := connectStdio(t, writeConfig(t, everythingServer(t)))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := mcp.ReadResourceRequest{}
	read.Params.URI = "demo://resource/dynamic/text/9"
	got, err := c.ReadResource(ctx, read)
	if err != nil || len(got.Contents) == 0 {
		t.Fatalf("read over stdio: %v %+v", err, got)
	}
	get := mcp.GetPromptRequest{}
	get.Params.Name = "everything__simple-prompt"
	if p, err := c.GetPrompt(ctx, get); err != nil || len(p.Messages) == 0 {
		t.Fatalf("prompts/get over stdio: %v %+v", err, p)
	}
}
