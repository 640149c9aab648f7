package orders

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
)

// Input schemas. They are sent to clients byte for byte (RawInputSchema), so keep them valid JSON
// Schema (draft 2020-12 keywords only) and in step with the handler-side checks below.
const (
	getOrderInput = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "integer", "minimum": 1, "description": "The order number, e.g. 4821."}
  },
  "required": ["order_id"],
  "additionalProperties": false
}`

	updateStatusInput = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "integer", "minimum": 1, "description": "The order number, e.g. 4821."},
    "status": {
      "type": "string",
      "enum": ["pending", "processing", "shipped", "delivered", "cancelled"],
      "description": "The new status."
    }
  },
  "required": ["order_id", "status"],
  "additionalProperties": false
}`

	refundInput = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "integer", "minimum": 1, "description": "The order number, e.g. 4821."},
    "amount": {
      "type": "number",
      "exclusiveMinimum": 0,
      "description": "Amount to refund in the order's currency, at most two decimals (e.g. 19.99). Must not exceed the order amount minus what was already refunded."
    },
    "reason": {"type": "string", "minLength": 1, "maxLength": 500, "description": "Why the refund is issued; kept on the refund record."}
  },
  "required": ["order_id", "amount", "reason"],
  "additionalProperties": false
}`

	replyInput = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "integer", "minimum": 1, "description": "The order the message is about; the reply goes to that order's customer."},
    "message": {"type": "string", "minLength": 1, "maxLength": 2000, "description": "The message text sent to the customer, as is."}
  },
  "required": ["order_id", "message"],
  "additionalProperties": false
}`
)

// Output schemas, matching what the handlers put in structuredContent.
const (
	orderOutput = `{
  "type": "object",
  "properties": {
    "order_id": {"type": "integer"},
    "status": {"type": "string", "enum": ["pending", "processing", "shipped", "delivered", "cancelled"]},
    "customer": {"type": "string"},
    "email": {"type": "string"},
    "amount": {"type": "number"},
    "currency": {"type": "string"},
    "region": {"type": "string"},
    "refunded": {"type": "number"}
  },
  "required": ["order_id", "status", "customer", "email", "amount", "currency", "region", "refunded"],
  "additionalProperties": false
}`

	updateStatusOutput = `{
  "type": "object",
  "properties": {
    "updated": {"type": "boolean"},
    "order_id": {"type": "integer"},
    "status": {"type": "string", "enum": ["pending", "processing", "shipped", "delivered", "cancelled"]}
  },
  "required": ["updated", "order_id", "status"],
  "additionalProperties": false
}`

	refundOutput = `{
  "type": "object",
  "properties": {
    "refund_id": {"type": "string"},
    "order_id": {"type": "integer"},
    "amount": {"type": "number"},
    "currency": {"type": "string"},
    "reason": {"type": "string"},
    "refunded_total": {"type": "number"},
    "remaining_refundable": {"type": "number"}
  },
  "required": ["refund_id", "order_id", "amount", "currency", "reason", "refunded_total", "remaining_refundable"],
  "additionalProperties": false
}`

	replyOutput = `{
  "type": "object",
  "properties": {
    "sent": {"type": "boolean"},
    "message_id": {"type": "string"},
    "order_id": {"type": "integer"}
  },
  "required": ["sent", "message_id", "order_id"],
  "additionalProperties": false
}`
)

func hint(b bool) *bool { return &b }

func annotations(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolAnnotation {
	return mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    hint(readOnly),
		DestructiveHint: hint(destructive),
		IdempotentHint:  hint(idempotent),
		OpenWorldHint:   hint(openWorld),
	}
}

func tools(s *store) []toolDef {
	return []toolDef{
		{
			tool: mcp.Tool{
				Name: "get_order",
				Description: "Look up one order by its number and return its status, customer, amount, currency, region " +
					"and how much has been refunded. Read-only. Fails with \"order N not found\" for an unknown number.",
				RawInputSchema:  json.RawMessage(getOrderInput),
				RawOutputSchema: json.RawMessage(orderOutput),
				Annotations:     annotations("Get order", true, false, true, false),
			},
			handle: s.handleGetOrder,
		},
		{
			tool: mcp.Tool{
				Name: "update_order_status",
				Description: "Set an order's status to pending, processing, shipped, delivered or cancelled. Setting the " +
					"status the order already has changes nothing and succeeds. A delivered or cancelled order can no " +
					"longer change status.",
				RawInputSchema:  json.RawMessage(updateStatusInput),
				RawOutputSchema: json.RawMessage(updateStatusOutput),
				Annotations:     annotations("Update order status", false, false, true, false),
			},
			handle: s.handleUpdateStatus,
		},
		{
			tool: mcp.Tool{
				Name: "refund_order",
				Description: "Refund money to the customer of an order. Each call issues a new refund (calling twice refunds " +
					"twice). The total refunded can never exceed the order amount; check get_order's amount and refunded first.",
				RawInputSchema:  json.RawMessage(refundInput),
				RawOutputSchema: json.RawMessage(refundOutput),
				Annotations:     annotations("Refund order", false, true, false, false),
			},
			handle: s.handleRefund,
		},
		{
			tool: mcp.Tool{
				Name: "send_customer_reply",
				Description: "Send a message to the customer of an order (by email, outside this system). Each call sends " +
					"another message; it cannot be recalled.",
				RawInputSchema:  json.RawMessage(replyInput),
				RawOutputSchema: json.RawMessage(replyOutput),
				Annotations:     annotations("Send customer reply", false, false, false, true),
			},
			handle: s.handleReply,
		},
	}
}

type toolDef struct {
	tool   mcp.Tool
	handle func(args map[string]json.RawMessage) (any, error)
}

func (s *store) handleGetOrder(args map[string]json.RawMessage) (any, error) {
	if err := onlyKeys(args, "order_id"); err != nil {
		return nil, err
	}
	id, err := orderID(args)
	if err != nil {
		return nil, err
	}
	return s.get(id)
}

func (s *store) handleUpdateStatus(args map[string]json.RawMessage) (any, error) {
	if err := onlyKeys(args, "order_id", "status"); err != nil {
		return nil, err
	}
	id, err := orderID(args)
	if err != nil {
		return nil, err
	}
	status, err := stringArg(args, "status", 1, 64)
	if err != nil {
		return nil, err
	}
	valid := false
	for _, st := range Statuses {
		valid = valid || st == status
	}
	if !valid {
		return nil, &toolError{fmt.Sprintf("invalid arguments: status %q is not one of pending, processing, shipped, delivered, cancelled", status)}
	}
	if err := s.setStatus(id, status); err != nil {
		return nil, err
	}
	return map[string]any{"updated": true, "order_id": id, "status": status}, nil
}

func (s *store) handleRefund(args map[string]json.RawMessage) (any, error) {
	if err := onlyKeys(args, "order_id", "amount", "reason"); err != nil {
		return nil, err
	}
	id, err := orderID(args)
	if err != nil {
		return nil, err
	}
	raw, ok := args["amount"]
	if !ok {
		return nil, &toolError{"invalid arguments: amount is required (a number greater than 0)"}
	}
	amount, err := jsonNumber(raw)
	if err != nil || math.IsNaN(amount) || math.IsInf(amount, 0) || amount <= 0 {
		return nil, &toolError{"invalid arguments: amount must be a number greater than 0"}
	}
	cents := math.Round(amount * 100)
	if cents < 1 || cents > math.MaxInt64/2 {
		return nil, &toolError{"invalid arguments: amount must be at least 0.01 and a sane amount of money"}
	}
	reason, err := stringArg(args, "reason", 1, 500)
	if err != nil {
		return nil, err
	}
	return s.refund(id, int64(cents), reason)
}

func (s *store) handleReply(args map[string]json.RawMessage) (any, error) {
	if err := onlyKeys(args, "order_id", "message"); err != nil {
		return nil, err
	}
	id, err := orderID(args)
	if err != nil {
		return nil, err
	}
	if _, err := stringArg(args, "message", 1, 2000); err != nil {
		return nil, err
	}
	mid, err := s.reply(id)
	if err != nil {
		return nil, err
	}
	return map[string]any{"sent": true, "message_id": mid, "order_id": id}, nil
}

// decodeArgs returns the call's arguments as an object of raw values, so that numbers are read from
// the bytes the client sent (never through float64 first).
func decodeArgs(req mcp.CallToolRequest) (map[string]json.RawMessage, error) {
	raw := req.Params.RawArguments
	if len(raw) == 0 {
		if req.Params.Arguments == nil {
			return map[string]json.RawMessage{}, nil
		}
		b, err := json.Marshal(req.Params.Arguments)
		if err != nil {
			return nil, &toolError{"invalid arguments: " + err.Error()}
		}
		raw = b
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, &toolError{"invalid arguments: arguments must be a JSON object"}
	}
	var args map[string]json.RawMessage
	if err := json.Unmarshal(raw, &args); err != nil {
		return nil, &toolError{"invalid arguments: " + err.Error()}
	}
	return args, nil
}

func onlyKeys(args map[string]json.RawMessage, allowed ...string) error {
	for k := range args {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return &toolError{fmt.Sprintf("invalid arguments: unknown field %q (allowed: %v)", k, allowed)}
		}
	}
	return nil
}

func orderID(args map[string]json.RawMessage) (int64, error) {
	raw, ok := args["order_id"]
	if !ok {
		return 0, &toolError{"invalid arguments: order_id is required (an integer >= 1, e.g. 4821)"}
	}
	bad := &toolError{"invalid arguments: order_id must be an integer >= 1, e.g. 4821"}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, bad
	}
	if id, err := strconv.ParseInt(string(t), 10, 64); err == nil {
		if id < 1 {
			return 0, bad
		}
		return id, nil
	}
	// JSON Schema's "integer" also admits 4821.0 and 4.821e3.
	f, err := strconv.ParseFloat(string(t), 64)
	if err != nil || f != math.Trunc(f) || f < 1 || f > 1<<53 {
		return 0, bad
	}
	return int64(f), nil
}

func jsonNumber(raw json.RawMessage) (float64, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || !(t[0] == '-' || (t[0] >= '0' && t[0] <= '9')) {
		return 0, errors.New("not a number")
	}
	return strconv.ParseFloat(string(t), 64)
}

func stringArg(args map[string]json.RawMessage, name string, minLen, maxLen int) (string, error) {
	raw, ok := args[name]
	if !ok {
		return "", &toolError{fmt.Sprintf("invalid arguments: %s is required (a string of %d to %d characters)", name, minLen, maxLen)}
	}
	var v string
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", &toolError{fmt.Sprintf("invalid arguments: %s must be a string", name)}
	}
	if n := utf8.RuneCountInString(v); n < minLen || n > maxLen {
		return "", &toolError{fmt.Sprintf("invalid arguments: %s must be %d to %d characters long, got %d", name, minLen, maxLen, n)}
	}
	return v, nil
}
