// The official OpenAI client (npm `openai`, unmodified) against a Lockstep deployment:
// structured outputs (response_format json_object and json_schema, chat and
// completions) and forced tool calls (tool_choice "required" and a named function,
// parallel_tool_calls on and off), each streamed and not, at temperature 1 with a seed
// per case (the tiny models' answers are random, and only the grammar makes them valid).
// Every output is parsed and validated by ajv (an independent JSON Schema
// validator) against the schema it was asked for; with --check-order, properties must
// also come in the schema's key order. Prints each failure and exits 1 when any case
// failed.
//
//   node client.mjs --base-url http://127.0.0.1:PORT/v1 --model NAME [--seeds N] [--check-order]
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, "node_modules", "x.js"));
const OpenAI = require("openai").default;
const Ajv2020 = require("ajv/dist/2020").default;

function flag(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : fallback;
}
const baseURL = flag("base-url");
const model = flag("model");
const seeds = Number(flag("seeds", "2"));
const checkOrder = process.argv.includes("--check-order");
if (!baseURL || !model) {
  console.error("usage: node client.mjs --base-url URL --model NAME [--seeds N]");
  process.exit(2);
}

// Properties deliberately out of alphabetical order (the output must keep this order).
const reviewSchema = {
  type: "object",
  properties: {
    title: { type: "string", maxLength: 12 },
    rating: { type: "integer", minimum: 1, maximum: 5 },
    tags: { type: "array", items: { enum: ["good", "bad", "odd"] }, maxItems: 3 },
    verdict: { anyOf: [{ type: "boolean" }, { type: "null" }] },
  },
  required: ["title", "rating", "tags", "verdict"],
  additionalProperties: false,
};

const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city.",
      parameters: {
        type: "object",
        properties: {
          unit: { enum: ["celsius", "fahrenheit"] },
          city: { type: "string", maxLength: 10 },
          days: { type: "integer", minimum: 1, maximum: 7 },
        },
        required: ["unit", "city"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "add",
      description: "Adds two numbers.",
      parameters: {
        type: "object",
        properties: {
          b: { type: "number", minimum: -100, maximum: 100 },
          a: { type: "number", minimum: -100, maximum: 100 },
        },
        required: ["b", "a"],
        additionalProperties: false,
      },
    },
  },
];

const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 180_000 });
const ajv = new Ajv2020({ strict: false, allErrors: true });
const failures = [];
let checked = 0;

// Parses `text` as JSON valid under `schema` with its properties in the schema's order;
// returns a problem or "".
function checkJson(text, schema) {
  let value;
  try {
    value = JSON.parse(text);
  } catch (e) {
    return `not JSON (${e.message}): ${JSON.stringify(text)}`;
  }
  const validate = ajv.compile(schema);
  if (!validate(value)) return `${ajv.errorsText(validate.errors)}: ${text}`;
  const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
  if (checkOrder && schema.properties && isObject) {
    const order = Object.keys(schema.properties).filter((k) => k in value);
    const got = Object.keys(value);
    if (JSON.stringify(order) !== JSON.stringify(got)) {
      return `properties in the order ${got.join(",")}, the schema's is ${order.join(",")}: ${text}`;
    }
  }
  return "";
}

function fail(name, what) {
  failures.push(`${name}: ${what}`);
}

// A chat completion, streamed or not, as {content, toolCalls, finish}.
async function chat(params, stream) {
  if (!stream) {
    const r = await client.chat.completions.create(params);
    const choice = r.choices[0];
    return {
      content: choice.message.content ?? "",
      toolCalls: (choice.message.tool_calls ?? []).map((c) => ({
        id: c.id,
        type: c.type,
        name: c.function.name,
        arguments: c.function.arguments,
      })),
      finish: choice.finish_reason,
    };
  }
  const s = await client.chat.completions.create({ ...params, stream: true });
  let content = "";
  let finish = null;
  const calls = [];
  for await (const chunk of s) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    content += choice.delta?.content ?? "";
    for (const d of choice.delta?.tool_calls ?? []) {
      calls[d.index] ??= { id: "", type: "", name: "", arguments: "" };
      const c = calls[d.index];
      if (d.id) c.id = d.id;
      if (d.type) c.type = d.type;
      if (d.function?.name) c.name += d.function.name;
      if (d.function?.arguments) c.arguments += d.function.arguments;
    }
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { content, toolCalls: calls.filter((c) => c), finish };
}

async function completion(params, stream) {
  if (!stream) {
    const r = await client.completions.create(params);
    return { text: r.choices[0].text, finish: r.choices[0].finish_reason };
  }
  const s = await client.completions.create({ ...params, stream: true });
  let text = "";
  let finish = null;
  for await (const chunk of s) {
    const choice = chunk.choices[0];
    if (!choice) continue;
    text += choice.text ?? "";
    if (choice.finish_reason) finish = choice.finish_reason;
  }
  return { text, finish };
}

const messages = [{ role: "user", content: "Review the film and answer in JSON." }];

async function jsonSchemaChat(name, seed, stream) {
  const r = await chat(
    {
      model,
      messages,
      temperature: 1,
      seed,
      max_tokens: 256,
      response_format: {
        type: "json_schema",
        json_schema: { name: "review", schema: reviewSchema, strict: true },
      },
    },
    stream,
  );
  if (r.finish !== "stop") return fail(name, `finish_reason ${r.finish}: ${r.content}`);
  if (r.toolCalls.length > 0) return fail(name, "tool calls in a json_schema answer");
  const problem = checkJson(r.content, reviewSchema);
  if (problem) return fail(name, problem);
  checked++;
}

async function jsonObjectChat(name, seed, stream) {
  const r = await chat(
    { model, messages, temperature: 1, seed, max_tokens: 256, response_format: { type: "json_object" } },
    stream,
  );
  // json_object has no bound on its size: a long object may end at max_tokens.
  if (r.finish !== "stop" && r.finish !== "length") return fail(name, `finish_reason ${r.finish}`);
  if (r.finish === "length") return;
  const problem = checkJson(r.content, { type: "object" });
  if (problem) return fail(name, problem);
  checked++;
}

async function jsonSchemaCompletion(name, seed, stream) {
  const r = await completion(
    {
      model,
      prompt: "A film review as JSON:",
      temperature: 1,
      seed,
      max_tokens: 256,
      response_format: {
        type: "json_schema",
        json_schema: { name: "review", schema: reviewSchema, strict: true },
      },
    },
    stream,
  );
  if (r.finish !== "stop") return fail(name, `finish_reason ${r.finish}: ${r.text}`);
  const problem = checkJson(r.text, reviewSchema);
  if (problem) return fail(name, problem);
  checked++;
}

async function toolCall(name, seed, stream, toolChoice, parallel) {
  const r = await chat(
    {
      model,
      messages: [{ role: "user", content: "What is the weather in Paris, and what is 2 + 3?" }],
      tools,
      tool_choice: toolChoice,
      parallel_tool_calls: parallel,
      temperature: 1,
      seed,
      max_tokens: 256,
    },
    stream,
  );
  // Parallel calls have no bound on their number: the last may be cut at max_tokens,
  // and then only the calls before it are checked.
  if (parallel && r.finish === "length") {
    r.toolCalls.pop();
  } else if (r.finish !== "tool_calls") {
    return fail(name, `finish_reason ${r.finish}: ${JSON.stringify(r)}`);
  }
  if (r.toolCalls.length === 0) return fail(name, `no complete tool_calls: ${JSON.stringify(r)}`);
  if (!parallel && r.toolCalls.length !== 1) {
    return fail(name, `${r.toolCalls.length} calls with parallel_tool_calls false`);
  }
  const ids = new Set();
  for (const c of r.toolCalls) {
    const tool = tools.find((t) => t.function.name === c.name);
    if (!tool) return fail(name, `a call of unknown function ${JSON.stringify(c.name)}`);
    if (typeof toolChoice === "object" && c.name !== toolChoice.function.name) {
      return fail(name, `called ${c.name}, tool_choice named ${toolChoice.function.name}`);
    }
    if (c.type !== "function" || !c.id || ids.has(c.id)) {
      return fail(name, `bad call id or type: ${JSON.stringify(c)}`);
    }
    ids.add(c.id);
    const problem = checkJson(c.arguments, tool.function.parameters);
    if (problem) return fail(name, `${c.name} arguments: ${problem}`);
  }
  checked++;
}

// The validator itself must reject a wrong output.
if (!checkJson('{"title": "x", "rating": 9, "tags": [], "verdict": null}', reviewSchema)) {
  console.error("the validator accepted an invalid output");
  process.exit(1);
}
if (checkOrder && !checkJson('{"rating": 1, "title": "x", "tags": [], "verdict": null}', reviewSchema)) {
  console.error("the order check accepted properties out of the schema's order");
  process.exit(1);
}

const cases = [];
for (let i = 0; i < seeds; i++) {
  for (const stream of [false, true]) {
    const s = stream ? "stream" : "whole";
    const seed = 1000 + 2 * i + (stream ? 1 : 0);
    const run = (name, f) =>
      cases.push(f().catch((e) => fail(name, `threw ${e?.status ?? ""} ${e?.message ?? e}`)));
    run(`json_schema chat ${s} seed ${seed}`, () => jsonSchemaChat(`json_schema chat ${s} seed ${seed}`, seed, stream));
    run(`json_schema completion ${s} seed ${seed}`, () =>
      jsonSchemaCompletion(`json_schema completion ${s} seed ${seed}`, seed, stream));
    run(`json_object chat ${s} seed ${seed}`, () => jsonObjectChat(`json_object chat ${s} seed ${seed}`, seed, stream));
    for (const parallel of [false, true]) {
      const p = parallel ? "parallel" : "single";
      run(`tool required ${p} ${s} seed ${seed}`, () =>
        toolCall(`tool required ${p} ${s} seed ${seed}`, seed, stream, "required", parallel));
    }
    const named = { type: "function", function: { name: "add" } };
    run(`tool named ${s} seed ${seed}`, () => toolCall(`tool named ${s} seed ${seed}`, seed, stream, named, true));
  }
}
await Promise.all(cases);
for (const f of failures) console.log(`FAIL ${f}`);
console.log(`${cases.length} cases, ${checked} outputs validated, ${failures.length} failed`);
process.exit(failures.length === 0 && checked > 0 ? 0 : 1);
