// TypeScript declarations from a JSON Schema, for scripts/gen_protocol.py (which
// writes js/src/protocol.gen.ts from nbstream/widgets/protocol.py). Reads
// {"schema": ..., "name": ...} on stdin, writes the declarations of every
// definition in the schema's $defs to stdout. Not part of the bundle.
import { compile } from "json-schema-to-typescript";

let input = "";
for await (const chunk of process.stdin) {
  input += chunk;
}
const { schema, name } = JSON.parse(input);
const ts = await compile(schema, name, {
  bannerComment: "",
  additionalProperties: false,
  unreachableDefinitions: true,
  format: false,
  cwd: process.cwd(),
});
process.stdout.write(ts);
