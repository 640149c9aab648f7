package conformanceserver

import (
	"log/slog"

	"github.com/mark3labs/mcp-go/server"
)

const (
	serverName    = "toolgate-conformance-upstream"
	serverVersion = "1.0.0"
)

// New returns a server offering everything the conformance suite's server scenarios call:
//
//	tools:     test_simple_text, test_image_content, test_audio_content, test_embedded_resource,
//	           test_multiple_content_types, test_error_handling, test_tool_with_logging,
//	           test_tool_with_progress, test_sampling, test_elicitation,
//	           test_elicitation_sep1034_defaults, test_elicitation_sep1330_enums,
//	           json_schema_2020_12_tool, test_reconnection, test_update_resource,
//	           test_input_required_result_elicitation, test_logging_tool,
//	           test_streaming_elicitation, test_missing_capability
//	resources: test://static-text, test://static-binary, test://watched-resource,
//	           template test://template/{id}/data (subscribe/unsubscribe supported)
//	prompts:   test_simple_prompt, test_prompt_with_arguments,
//	           test_prompt_with_embedded_resource, test_prompt_with_image
//	also:      logging/setLevel, completion/complete, ping
//
// It logs nothing; Main logs every request to stderr.
func New() *server.MCPServer {
	return newServer(nil)
}

// newServer builds the server; a non-nil logger receives a line per request.
func newServer(logger *slog.Logger) *server.MCPServer {
	subs := newSubscriptions()
	hooks := &server.Hooks{}
	subs.install(hooks)

	opts := []server.ServerOption{
		server.WithToolCapabilities(true),
		// subscribe=true: the resources-subscribe/unsubscribe scenarios need the capability, and
		// test_update_resource gives subscriptions something to be notified about.
		server.WithResourceCapabilities(true, true),
		server.WithPromptCapabilities(true),
		server.WithLogging(),
		server.WithCompletions(),
		// Not WithElicitation or EnableSampling: they only add "elicitation"/"sampling" to the
		// *server* capabilities (mcp-go server/server.go:1240-1246), where the spec defines
		// neither; they are client capabilities, and the requests work without them.
		server.WithPromptCompletionProvider(promptCompletions{}),
		server.WithResourceCompletionProvider(resourceCompletions{}),
		server.WithHooks(hooks),
		server.WithRecovery(),
	}
	if logger != nil {
		opts = append(opts, server.WithLogger(logger))
	}
	s := server.NewMCPServer(serverName, serverVersion, opts...)

	addContentTools(s)
	addNotifyingTools(s)
	addInteractiveTools(s)
	addProbeTools(s)
	addResources(s, subs)
	addPrompts(s)
	return s
}
