package conformanceserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

func TestLists(t *testing.T) {
	wantTools := []string{
		"json_schema_2020_12_tool", "test_audio_content", "test_elicitation",
		"test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums", "test_embedded_resource",
		"test_error_handling", "test_image_content", "test_input_required_result_elicitation",
		"test_logging_tool", "test_missing_capability", "test_multiple_content_types", "test_reconnection",
		"test_sampling", "test_simple_text", "test_streaming_elicitation", "test_tool_with_logging",
		"test_tool_with_progress", "test_update_resource",
	}
	wantResources := []string{staticBinaryURI, staticTextURI, watchedURI}
	wantPrompts := []string{"test_prompt_with_arguments", "test_prompt_with_embedded_resource", "test_prompt_with_image", "test_simple_prompt"}
	for _, tc := range transports {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.connect(t)
			ctx := testContext(t)
			tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
				if tool.Description == "" {
					t.Errorf("tool %s has no description (tools-list requires one)", tool.Name)
				}
			}
			checkNames(t, "tools", names, wantTools)

			resources, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			names = nil
			for _, r := range resources.Resources {
				names = append(names, r.URI)
			}
			checkNames(t, "resources", names, wantResources)

			templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate.Raw() != templateURI {
				t.Errorf("templates = %+v, want only %s", templates.ResourceTemplates, templateURI)
			}

			prompts, err := c.ListPrompts(ctx, mcp.ListPromptsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			names = nil
			for _, p := range prompts.Prompts {
				names = append(names, p.Name)
			}
			checkNames(t, "prompts", names, wantPrompts)
		})
	}
}

func checkNames(t *testing.T, what string, got, want []string) {
	t.Helper()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func TestContentTools(t *testing.T) {
	cases := []struct {
		tool  string
		check func(t *testing.T, res *mcp.CallToolResult)
	}{
		{"test_simple_text", wantText(simpleText)},
		{"test_error_handling", func(t *testing.T, res *mcp.CallToolResult) {
			if !res.IsError {
				t.Error("isError = false, want true")
			}
			wantText(errorText)(t, res)
		}},
		{"test_image_content", func(t *testing.T, res *mcp.CallToolResult) {
			img := res.Content[0].(mcp.ImageContent)
			checkMedia(t, img.MIMEType, "image/png", img.Data, "\x89PNG")
		}},
		{"test_audio_content", func(t *testing.T, res *mcp.CallToolResult) {
			audio := res.Content[0].(mcp.AudioContent)
			checkMedia(t, audio.MIMEType, "audio/wav", audio.Data, "RIFF")
		}},
		{"test_embedded_resource", func(t *testing.T, res *mcp.CallToolResult) {
			checkEmbedded(t, res.Content[0], embeddedURI, "text/plain", embeddedText)
		}},
		{"test_multiple_content_types", func(t *testing.T, res *mcp.CallToolResult) {
			if len(res.Content) != 3 {
				t.Fatalf("want 3 blocks, got %d", len(res.Content))
			}
			if text := res.Content[0].(mcp.TextContent).Text; text != mixedIntroText {
				t.Errorf("text = %q", text)
			}
			checkMedia(t, res.Content[1].(mcp.ImageContent).MIMEType, "image/png", res.Content[1].(mcp.ImageContent).Data, "\x89PNG")
			checkEmbedded(t, res.Content[2], mixedResourceURI, "application/json", mixedResourceJSON)
		}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			for _, tc := range cases {
				t.Run(tc.tool, func(t *testing.T) { tc.check(t, callTool(t, c, tc.tool, nil)) })
			}
		})
	}
}

func wantText(want string) func(*testing.T, *mcp.CallToolResult) {
	return func(t *testing.T, res *mcp.CallToolResult) {
		t.Helper()
		if got := onlyText(t, res); got != want {
			t.Errorf("text = %q, want %q", got, want)
		}
	}
}

func checkMedia(t *testing.T, mimeType, wantType, data, magic string) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || !strings.HasPrefix(string(raw), magic) || mimeType != wantType {
		t.Errorf("media %s, %d bytes (err %v), want %s starting %q", mimeType, len(raw), err, wantType, magic)
	}
}

func checkEmbedded(t *testing.T, c mcp.Content, uri, mimeType, text string) {
	t.Helper()
	res, ok := c.(mcp.EmbeddedResource)
	if !ok {
		t.Fatalf("want embedded resource, got %T", c)
	}
	got, ok := res.Resource.(mcp.TextResourceContents)
	if !ok || got.URI != uri || got.MIMEType != mimeType || got.Text != text {
		t.Errorf("embedded = %#v, want %s %s %q", res.Resource, uri, mimeType, text)
	}
}

func TestReadResource(t *testing.T) {
	cases := []struct {
		uri, mimeType, text, blobMagic string
	}{
		{uri: staticTextURI, mimeType: "text/plain", text: staticText},
		{uri: staticBinaryURI, mimeType: "image/png", blobMagic: "\x89PNG"},
		{uri: "test://template/123/data", mimeType: "application/json",
			text: `{"id":"123","templateTest":true,"data":"Data for ID: 123"}`},
		{uri: watchedURI, mimeType: "text/plain", text: "Watched resource, version 0"},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			for _, tc := range cases {
				t.Run(tc.uri, func(t *testing.T) {
					req := mcp.ReadResourceRequest{}
					req.Params.URI = tc.uri
					res, err := c.ReadResource(testContext(t), req)
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Contents) != 1 {
						t.Fatalf("want one content, got %d", len(res.Contents))
					}
					switch got := res.Contents[0].(type) {
					case mcp.TextResourceContents:
						if got.URI != tc.uri || got.MIMEType != tc.mimeType || got.Text != tc.text {
							t.Errorf("got %#v", got)
						}
					case mcp.BlobResourceContents:
						checkMedia(t, got.MIMEType, tc.mimeType, got.Blob, tc.blobMagic)
					default:
						t.Fatalf("unexpected %T", got)
					}
				})
			}
		})
	}
}

func TestGetPrompt(t *testing.T) {
	cases := []struct {
		name  string
		args  map[string]string
		roles int      // messages expected
		want  []string // substrings of the messages' JSON
	}{
		{"test_simple_prompt", nil, 1, []string{"This is a simple prompt for testing."}},
		{"test_prompt_with_arguments", map[string]string{"arg1": "hello", "arg2": "world"}, 1,
			[]string{"Prompt with arguments: arg1='hello', arg2='world'"}},
		{"test_prompt_with_embedded_resource", map[string]string{"resourceUri": "test://example-resource"}, 2,
			[]string{`"type":"resource"`, `"uri":"test://example-resource"`, "Please process the embedded resource above."}},
		{"test_prompt_with_image", nil, 2, []string{`"type":"image"`, `"mimeType":"image/png"`, "Please analyze the image above."}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) {
					req := mcp.GetPromptRequest{}
					req.Params.Name, req.Params.Arguments = tc.name, tc.args
					res, err := c.GetPrompt(testContext(t), req)
					if err != nil {
						t.Fatal(err)
					}
					raw, _ := json.Marshal(res.Messages)
					if len(res.Messages) != tc.roles {
						t.Errorf("%d messages, want %d: %s", len(res.Messages), tc.roles, raw)
					}
					for _, w := range tc.want {
						if !strings.Contains(string(raw), w) {
							t.Errorf("messages %s lack %s", raw, w)
						}
					}
				})
			}
			t.Run("missing argument", func(t *testing.T) {
				req := mcp.GetPromptRequest{}
				req.Params.Name, req.Params.Arguments = "test_prompt_with_arguments", map[string]string{"arg1": "x"}
				if _, err := c.GetPrompt(testContext(t), req); err == nil || !strings.Contains(err.Error(), "arg2") {
					t.Errorf("err = %v, want one naming arg2", err)
				}
			})
		})
	}
}

// TestInteractiveTools checks that sampling and elicitation reach the client's handlers with the
// requests the scenarios prescribe, over both protocol eras, and that the answer comes back.
func TestInteractiveTools(t *testing.T) {
	answer := map[string]any{"username": "testuser", "email": "test@example.com"}
	cases := []struct {
		tool     string
		args     map[string]any
		wantText string
		check    func(t *testing.T, llm *fakeLLM, user *fakeUser)
	}{
		{"test_sampling", map[string]any{"prompt": "Test prompt"}, "LLM response: sampled answer",
			func(t *testing.T, llm *fakeLLM, _ *fakeUser) {
				reqs := llm.requests()
				if len(reqs) != 1 || reqs[0].MaxTokens != 100 || len(reqs[0].Messages) != 1 ||
					reqs[0].Messages[0].Role != mcp.RoleUser || contentText(reqs[0].Messages[0].Content) != "Test prompt" {
					t.Errorf("sampling requests = %+v", reqs)
				}
			}},
		{"test_elicitation", map[string]any{"message": "Who are you?"},
			`User response: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			wantElicited("Who are you?", "username", "email")},
		{"test_elicitation_sep1034_defaults", nil,
			`Elicitation completed: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			wantElicited(defaultsMessage, "name", "age", "score", "status", "verified")},
		{"test_elicitation_sep1330_enums", nil,
			`Elicitation completed: action=accept, content={"email":"test@example.com","username":"testuser"}`,
			wantElicited(enumsMessage, "untitledSingle", "titledSingle", "legacyEnum", "untitledMulti", "titledMulti")},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			for _, tc := range cases {
				t.Run(tc.tool, func(t *testing.T) {
					llm, user := &fakeLLM{}, &fakeUser{answer: answer}
					c := tr.connect(t, client.WithSamplingHandler(llm), client.WithElicitationHandler(user))
					res := callTool(t, c, tc.tool, tc.args)
					if res.IsError {
						t.Fatalf("isError: %v", res.Content)
					}
					if got := onlyText(t, res); got != tc.wantText {
						t.Errorf("text = %q, want %q", got, tc.wantText)
					}
					tc.check(t, llm, user)
				})
			}
		})
	}
}

// wantElicited checks that exactly one elicitation was requested, with msg and a schema having
// exactly the given properties.
func wantElicited(msg string, props ...string) func(*testing.T, *fakeLLM, *fakeUser) {
	return func(t *testing.T, _ *fakeLLM, user *fakeUser) {
		t.Helper()
		reqs := user.requests()
		if len(reqs) != 1 {
			t.Fatalf("%d elicitations, want 1", len(reqs))
		}
		raw, _ := json.Marshal(reqs[0].Params.RequestedSchema)
		var schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatal(err)
		}
		var got []string
		for p := range schema.Properties {
			got = append(got, p)
		}
		slices.Sort(props)
		if reqs[0].Params.Message != msg {
			t.Errorf("message = %q, want %q", reqs[0].Params.Message, msg)
		}
		checkNames(t, "schema properties", got, props)
	}
}

// TestInteractiveToolsWithoutCapability: a client that declared neither sampling nor elicitation
// gets a tool error, not a request it cannot answer.
func TestInteractiveToolsWithoutCapability(t *testing.T) {
	cases := map[string]map[string]any{
		"test_sampling":                     {"prompt": "p"},
		"test_elicitation":                  {"message": "m"},
		"test_elicitation_sep1034_defaults": nil,
		"test_elicitation_sep1330_enums":    nil,
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			for tool, args := range cases {
				res := callTool(t, c, tool, args)
				if text := onlyText(t, res); !res.IsError || !strings.Contains(text, "does not support") {
					t.Errorf("%s: isError=%v %q, want a 'does not support' tool error", tool, res.IsError, text)
				}
			}
		})
	}
}

func TestLoggingAndProgress(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name+"/logging", func(t *testing.T) {
			c := tr.connect(t)
			logs := notifications(c, string(mcp.MethodNotificationMessage))
			req := mcp.SetLevelRequest{}
			req.Params.Level = mcp.LoggingLevelDebug
			if err := c.SetLevel(testContext(t), req); err != nil {
				t.Fatal(err)
			}
			callTool(t, c, "test_tool_with_logging", nil)
			var got []string
			for _, n := range receive(t, logs, 3) {
				got = append(got, n.Params.AdditionalFields["data"].(string))
			}
			want := []string{"Tool execution started", "Tool processing data", "Tool execution completed"}
			if !slices.Equal(got, want) {
				t.Errorf("logs = %q, want %q", got, want)
			}
		})
		t.Run(tr.name+"/log level filters", func(t *testing.T) {
			c := tr.connect(t)
			logs := notifications(c, string(mcp.MethodNotificationMessage))
			req := mcp.SetLevelRequest{}
			req.Params.Level = mcp.LoggingLevelError
			if err := c.SetLevel(testContext(t), req); err != nil {
				t.Fatal(err)
			}
			// The tool reports a notification it could not queue as an error; a filtered one is
			// not sent at all, so the call succeeds and nothing arrives before its answer.
			if res := callTool(t, c, "test_tool_with_logging", nil); res.IsError {
				t.Fatalf("isError: %v", res.Content)
			}
			if len(logs) != 0 {
				t.Errorf("%d info logs got through an error level", len(logs))
			}
		})
		t.Run(tr.name+"/progress", func(t *testing.T) {
			c := tr.connect(t)
			progress := notifications(c, string(mcp.MethodNotificationProgress))
			req := mcp.CallToolRequest{}
			req.Params.Name = "test_tool_with_progress"
			req.Params.Meta = &mcp.Meta{ProgressToken: "tok-1"}
			if _, err := c.CallTool(testContext(t), req); err != nil {
				t.Fatal(err)
			}
			var got []float64
			for _, n := range receive(t, progress, 3) {
				if tok := n.Params.AdditionalFields["progressToken"]; tok != "tok-1" {
					t.Errorf("progressToken = %v", tok)
				}
				got = append(got, n.Params.AdditionalFields["progress"].(float64))
			}
			if !slices.Equal(got, []float64{0, 50, 100}) {
				t.Errorf("progress = %v, want 0 50 100", got)
			}
		})
	}
}

func TestCompletion(t *testing.T) {
	cases := []struct {
		name  string
		ref   any
		arg   mcp.CompleteArgument
		wants []string
	}{
		{"prompt arg1", mcp.PromptReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
			mcp.CompleteArgument{Name: "arg1", Value: "par"}, []string{"paris", "park", "party"}},
		{"prompt arg1 suite value", mcp.PromptReference{Type: "ref/prompt", Name: "test_prompt_with_arguments"},
			mcp.CompleteArgument{Name: "arg1", Value: "test"}, []string{"test", "testing", "tested"}},
		{"unknown prompt", mcp.PromptReference{Type: "ref/prompt", Name: "nope"},
			mcp.CompleteArgument{Name: "arg1", Value: ""}, []string{}},
		{"template id", mcp.ResourceReference{Type: "ref/resource", URI: templateURI},
			mcp.CompleteArgument{Name: "id", Value: "1"}, []string{"1", "123"}},
	}
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			for _, tc := range cases {
				req := mcp.CompleteRequest{}
				req.Params.Ref, req.Params.Argument = tc.ref, tc.arg
				res, err := c.Complete(testContext(t), req)
				if err != nil {
					t.Fatalf("%s: %v", tc.name, err)
				}
				if !slices.Equal(res.Completion.Values, tc.wants) {
					t.Errorf("%s: values = %q, want %q", tc.name, res.Completion.Values, tc.wants)
				}
			}
		})
	}
}

// TestSubscriptions: resources/updated reaches the sessions subscribed to the URI, and only while
// they are. (Protocol 2026-07-28 replaced resources/subscribe with subscriptions/listen.)
func TestSubscriptions(t *testing.T) {
	for _, tr := range transports {
		if tr.modern {
			continue
		}
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			updates := notifications(c, string(mcp.MethodNotificationResourceUpdated))
			ctx := testContext(t)
			sub := mcp.SubscribeRequest{}
			sub.Params.URI = watchedURI
			if err := c.Subscribe(ctx, sub); err != nil {
				t.Fatal(err)
			}
			if text := onlyText(t, callTool(t, c, "test_update_resource", nil)); !strings.Contains(text, "1 subscribed session(s) notified") {
				t.Errorf("update = %q", text)
			}
			if uri := receive(t, updates, 1)[0].Params.AdditionalFields["uri"]; uri != watchedURI {
				t.Errorf("updated uri = %v", uri)
			}
			unsub := mcp.UnsubscribeRequest{}
			unsub.Params.URI = watchedURI
			if err := c.Unsubscribe(ctx, unsub); err != nil {
				t.Fatal(err)
			}
			if text := onlyText(t, callTool(t, c, "test_update_resource", nil)); !strings.Contains(text, "0 subscribed session(s) notified") {
				t.Errorf("update after unsubscribe = %q", text)
			}
		})
	}
}

func TestJSONSchema2020ToolEchoesArguments(t *testing.T) {
	c := connectInProcess(mcp.LATEST_LEGACY_PROTOCOL_VERSION)(t)
	args := map[string]any{"name": "n", "address": map[string]any{"city": "c"}}
	if got := onlyText(t, callTool(t, c, "json_schema_2020_12_tool", args)); got != `Received arguments: {"address":{"city":"c"},"name":"n"}` {
		t.Errorf("text = %q", got)
	}
}

// TestLegacySamplingNeedsListeningStream pins an mcp-go server behaviour that matters to anyone
// calling test_sampling through Streamable HTTP before 2026-07-28: unlike elicitation/create,
// sampling/createMessage is only ever sent on the session's GET stream
// (server/streamable_http.go:1934-1941; elicitation tries the POST stream first, 2052-2062), so
// a client without one never sees the request and the call hangs. If this test fails, mcp-go
// started using the POST stream: drop the WithContinuousListening workaround in connectHTTP.
func TestLegacySamplingNeedsListeningStream(t *testing.T) {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	tr, err := transport.NewStreamableHTTP(startHTTP(t), transport.WithHTTPBasicClient(hc))
	if err != nil {
		t.Fatal(err)
	}
	llm := &fakeLLM{}
	c := initialized(t, client.NewClient(tr, client.WithSamplingHandler(llm),
		client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)))
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name, req.Params.Arguments = "test_sampling", map[string]any{"prompt": "p"}
	if _, err := c.CallTool(ctx, req); err == nil || len(llm.requests()) != 0 {
		t.Errorf("sampling without a GET stream: err %v, %d requests seen; mcp-go changed", err, len(llm.requests()))
	}
}

// TestProgressIsNotDropped runs many concurrent calls, because the notification loss this server
// avoids by writing notifications itself (ordered.go) shows up in a few percent of calls, not in every one.
func TestProgressIsNotDropped(t *testing.T) {
	const calls = 20
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			c := tr.connect(t)
			progress := make(chan mcp.JSONRPCNotification, 3*calls)
			c.OnNotification(func(n mcp.JSONRPCNotification) {
				if n.Method == string(mcp.MethodNotificationProgress) {
					progress <- n
				}
			})
			errs := make(chan error, calls)
			for i := range calls {
				go func() {
					req := mcp.CallToolRequest{}
					req.Params.Name = "test_tool_with_progress"
					req.Params.Meta = &mcp.Meta{ProgressToken: fmt.Sprintf("tok-%d", i)}
					res, err := c.CallTool(testContext(t), req)
					if err == nil && res.IsError {
						err = fmt.Errorf("tool error: %v", res.Content)
					}
					errs <- err
				}()
			}
			for range calls {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			perToken := map[any]int{}
			for _, n := range receive(t, progress, 3*calls) {
				perToken[n.Params.AdditionalFields["progressToken"]]++
			}
			for tok, n := range perToken {
				if n != 3 {
					t.Errorf("%v: %d notifications", tok, n)
				}
			}
		})
	}
}
