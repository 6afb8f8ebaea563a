// Validates constrained outputs against their JSON Schemas with ajv (draft 2020-12
// keywords, formats from ajv-formats). Input: a JSON-lines file, each line
// {"seed": N, "schema": {...}, "output": "<generated text>"}. Prints each failure with
// its seed and exits 1 when any output is not valid JSON or does not validate.
"use strict";
const fs = require("fs");
const path = require("path");
const modules = path.join(__dirname, "node_modules");
const Ajv2020 = require(path.join(modules, "ajv/dist/2020")).default;
const addFormats = require(path.join(modules, "ajv-formats"));

const lines = fs.readFileSync(process.argv[2], "utf8").split("\n").filter((l) => l.length > 0);
let failures = 0;
for (const line of lines) {
  const c = JSON.parse(line);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  let value;
  try {
    value = JSON.parse(c.output);
  } catch (e) {
    console.log(`seed ${c.seed}: output is not JSON (${e.message}): ${c.output}`);
    failures++;
    continue;
  }
  const validate = ajv.compile(c.schema);
  if (!validate(value)) {
    console.log(`seed ${c.seed}: ${ajv.errorsText(validate.errors)}\n  schema ${JSON.stringify(c.schema)}\n  output ${c.output}`);
    failures++;
  }
}
console.log(`${lines.length} outputs checked, ${failures} invalid`);
process.exit(failures === 0 && lines.length > 0 ? 0 : 1);
