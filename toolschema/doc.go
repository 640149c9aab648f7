// Package toolschema is the single place where JSON Schemas that come from
// upstream MCP servers (a tool's inputSchema and outputSchema) are checked,
// compiled and applied.
//
// Those schemas are untrusted input: an upstream can send a schema that
// points the compiler at a remote or local file, that takes seconds to
// compile, or that makes every validation recurse forever or branch
// exponentially. Everything that touches such a schema therefore goes
// through [Compile], which
//
//  1. reads the raw bytes once under hard [Limits] (size, nesting depth,
//     number of values, number of $refs) before any compiler sees them;
//  2. checks every reference-like keyword: $ref, $dynamicRef and
//     $recursiveRef must be local fragments ("#", "#/json/pointer",
//     "#anchor") that resolve inside the same document; $id must be a plain
//     fragment, so "#/..." always means this document and never a base URI
//     the compiler could try to fetch; $schema must name a dialect the
//     compiler ships (draft-04, -06, -07, 2019-09, 2020-12);
//  3. rejects reference cycles that come back to a schema without
//     descending into the instance ({"$ref":"#"}, a -> b -> a), while
//     accepting real recursion (a tree node whose children.items refers
//     back to the node);
//  4. bounds the worst-case number of subschema evaluations per instance
//     value, which catches $refs that fan out exponentially;
//  5. compiles with santhosh-tekuri/jsonschema/v6, whose URL loader is
//     replaced by one that refuses every URL, as a second line of defence.
//
// The compiled [Schema] validates tools/call arguments
// ([Schema.ValidateArguments]) and other instances ([Schema.Validate]) and
// reports a [Violation] whose message is short enough to hand to a model.
//
// Choices worth knowing:
//   - The dialect is JSON Schema 2020-12 when $schema is absent.
//   - "format" is an annotation, never asserted, in every dialect
//     ("format": "email" documents intent only). The one exception is
//     "regex" in draft-04/06/07, which the compiler always checks.
//   - Objects with duplicate keys are rejected, in schemas and in instances:
//     Go keeps the last duplicate, other parsers keep the first, and an
//     argument that means one thing to the gateway and another to the
//     upstream defeats validation.
//   - Numbers are decoded as json.Number (never float64), so integers above
//     2^53 are compared exactly. Number literals longer than 100 characters
//     or with an exponent beyond ±400 are refused: the validator turns every
//     number into a big.Rat, and 1e999999 alone costs ~25 ms.
//   - Instances may nest at most 256 levels. Their size is not limited here;
//     the transport must cap it.
//   - The pre-check reads keys without knowing which values are schemas: a
//     "$ref" string inside a "default" or "examples" value is checked like a
//     real one. That can only reject a schema, never let one through.
//   - Whether undeclared arguments are allowed is the upstream schema's
//     business (additionalProperties); this package neither strips nor adds.
package toolschema
