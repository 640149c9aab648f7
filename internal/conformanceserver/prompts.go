package conformanceserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func addPrompts(s *server.MCPServer) {
	s.AddPrompt(mcp.NewPrompt("test_simple_prompt",
		mcp.WithPromptDescription("A prompt without arguments")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return promptResult(userText("This is a simple prompt for testing.")), nil
		})
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_arguments",
		mcp.WithPromptDescription("A prompt with two required arguments"),
		mcp.WithArgument("arg1", mcp.ArgumentDescription("First test argument"), mcp.RequiredArgument()),
		mcp.WithArgument("arg2", mcp.ArgumentDescription("Second test argument"), mcp.RequiredArgument())),
		promptWithArguments)
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_embedded_resource",
		mcp.WithPromptDescription("A prompt that embeds the resource it is given"),
		mcp.WithArgument("resourceUri", mcp.ArgumentDescription("URI of the resource to embed"), mcp.RequiredArgument())),
		promptWithResource)
	s.AddPrompt(mcp.NewPrompt("test_prompt_with_image",
		mcp.WithPromptDescription("A prompt that carries an image")),
		func(context.Context, mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return promptResult(
				mcp.PromptMessage{Role: mcp.RoleUser, Content: mcp.NewImageContent(redPixelPNG, "image/png")},
				userText("Please analyze the image above.")), nil
		})
}

func promptWithArguments(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, err := requireArgs(req, "arg1", "arg2")
	if err != nil {
		return nil, err
	}
	return promptResult(userText(fmt.Sprintf("Prompt with arguments: arg1='%s', arg2='%s'", args[0], args[1]))), nil
}

func promptWithResource(_ context.Context, req mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	args, err := requireArgs(req, "resourceUri")
	if err != nil {
		return nil, err
	}
	return promptResult(
		mcp.PromptMessage{Role: mcp.RoleUser, Content: textResource(args[0], "text/plain", "Embedded resource content for testing.")},
		userText("Please process the embedded resource above.")), nil
}

// requireArgs returns the named arguments in order. mcp-go does not enforce a prompt's required
// arguments, so a missing one is reported here (as a JSON-RPC error: there is no isError for prompts).
func requireArgs(req mcp.GetPromptRequest, names ...string) ([]string, error) {
	vals := make([]string, len(names))
	for i, name := range names {
		v, ok := req.Params.Arguments[name]
		if !ok {
			return nil, fmt.Errorf("prompt %s: missing required argument %q", req.Params.Name, name)
		}
		vals[i] = v
	}
	return vals, nil
}

func userText(text string) mcp.PromptMessage {
	return mcp.PromptMessage{Role: mcp.RoleUser, Content: mcp.NewTextContent(text)}
}

func promptResult(msgs ...mcp.PromptMessage) *mcp.GetPromptResult {
	return &mcp.GetPromptResult{Messages: msgs}
}

// Completion candidates. The completion-complete scenario only needs a well-formed answer; real
// candidates, filtered by prefix, let a gateway test check that values pass through.
var (
	promptArgValues = map[string][]string{
		"arg1": {"paris", "park", "party", "test", "testing", "tested"},
		"arg2": {"world", "word", "work"},
	}
	templateIDValues = []string{"1", "2", "3", "42", "123"}
)

type promptCompletions struct{}

func (promptCompletions) CompletePromptArgument(_ context.Context, prompt string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if prompt != "test_prompt_with_arguments" {
		return &mcp.Completion{Values: []string{}}, nil // nothing to complete, which is not an error
	}
	return completeFrom(promptArgValues[arg.Name], arg.Value), nil
}

type resourceCompletions struct{}

func (resourceCompletions) CompleteResourceArgument(_ context.Context, uri string, arg mcp.CompleteArgument, _ mcp.CompleteContext) (*mcp.Completion, error) {
	if uri != templateURI || arg.Name != "id" {
		return &mcp.Completion{Values: []string{}}, nil
	}
	return completeFrom(templateIDValues, arg.Value), nil
}

func completeFrom(candidates []string, prefix string) *mcp.Completion {
	values := []string{}
	for _, c := range candidates {
		if strings.HasPrefix(c, prefix) {
			values = append(values, c)
		}
	}
	return &mcp.Completion{Values: values, Total: len(values), HasMore: false}
}
