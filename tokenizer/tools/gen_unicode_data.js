// Writes tokenizer/unicode_data.cc: the Unicode tables of the Hugging Face tokenizer
// (general categories for \p{..}, canonical decompositions, combining-class order and
// primary compositions for NFC), read off this Node's ICU so that they agree with the
// JavaScript reference the tests compare against.
//
//   node tokenizer/tools/gen_unicode_data.js > tokenizer/unicode_data.cc
'use strict';

const kCategories = [
  'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'Mn', 'Mc', 'Me', 'Nd', 'Nl', 'No', 'Pc', 'Pd', 'Ps', 'Pe',
  'Pi', 'Pf', 'Po', 'Sm', 'Sc', 'Sk', 'So', 'Zs', 'Zl', 'Zp', 'Cc', 'Cf', 'Cs', 'Co', 'Cn',
];
const kMaxCodePoint = 0x10ffff;
const hex = (cp) => '0x' + cp.toString(16).toUpperCase();
const chr = (cp) => String.fromCodePoint(cp);
const cps = (s) => Array.from(s, (c) => c.codePointAt(0));
const isSurrogate = (cp) => cp >= 0xd800 && cp <= 0xdfff;
const isHangulSyllable = (cp) => cp >= 0xac00 && cp <= 0xd7a3;

// General category runs: (first code point << 5) | category index.
function categoryRuns() {
  const regexes = kCategories.map((gc) => new RegExp(`^\\p{gc=${gc}}$`, 'u'));
  const major = {
    L: /^\p{L}$/u, M: /^\p{M}$/u, N: /^\p{N}$/u, P: /^\p{P}$/u, S: /^\p{S}$/u, Z: /^\p{Z}$/u,
  };
  const runs = [];
  let last = -1;
  for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
    let gc;
    if (isSurrogate(cp)) {
      gc = kCategories.indexOf('Cs');
    } else {
      const s = chr(cp);
      let candidates = kCategories.map((_, i) => i);
      for (const [letter, re] of Object.entries(major)) {
        if (re.test(s)) {
          candidates = candidates.filter((i) => kCategories[i][0] === letter);
          break;
        }
      }
      gc = candidates.find((i) => regexes[i].test(s));
      if (gc === undefined) throw new Error(`no category for ${hex(cp)}`);
    }
    if (gc !== last) {
      runs.push((cp << 5) | gc);
      last = gc;
    }
  }
  return runs;
}

const nfd = (s) => s.normalize('NFD');
const nfc = (s) => s.normalize('NFC');

// Canonical combining classes are not exposed to JavaScript, but their order is: NFD
// swaps two adjacent marks exactly when the first has the higher class. Returns
// [code point, rank] by code point, ranks 1.. in class order (starters left out).
function combiningRanks() {
  const low = 0x0334;   // class 1, the lowest non-zero class
  const high = 0x0345;  // class 240, the highest
  const marks = [];
  for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (isSurrogate(cp) || nfd(chr(cp)) !== chr(cp)) continue;
    const s = chr(cp);
    const abovelow = cp !== low && nfd(s + chr(low)) === chr(low) + s;
    const belowhigh = cp !== high && nfd(chr(high) + s) === s + chr(high);
    if (abovelow || belowhigh || cp === low || cp === high) marks.push(cp);
  }
  const greater = (a, b) => nfd(chr(a) + chr(b)) === chr(b) + chr(a);
  marks.sort((a, b) => (greater(a, b) ? 1 : greater(b, a) ? -1 : 0));
  const out = [];
  let rank = 0;
  for (let i = 0; i < marks.length; ++i) {
    if (i === 0 || greater(marks[i], marks[i - 1])) ++rank;
    out.push([marks[i], rank]);
  }
  return out.sort((a, b) => a[0] - b[0]);
}

// Full canonical decompositions (Hangul syllables are algorithmic and left out).
function decompositions() {
  const out = [];
  for (let cp = 0; cp <= kMaxCodePoint; ++cp) {
    if (isSurrogate(cp) || isHangulSyllable(cp)) continue;
    const d = nfd(chr(cp));
    if (d !== chr(cp)) out.push([cp, cps(d)]);
  }
  return out;
}

// Primary composites: pairs (first, second) -> composite that NFC builds. The pair is
// found by splitting the composite's decomposition before one code point and checking
// that NFC joins the parts back.
function compositions(decomps) {
  const out = [];
  for (const [cp, d] of decomps) {
    if (nfc(chr(cp)) !== chr(cp)) continue;  // excluded or a singleton
    let found = null;
    for (let k = d.length - 1; k >= 1 && !found; --k) {
      const second = d[k];
      const rest = d.slice(0, k).concat(d.slice(k + 1));
      const first = cps(nfc(String.fromCodePoint(...rest)));
      if (first.length === 1 && nfc(chr(first[0]) + chr(second)) === chr(cp) &&
          nfd(chr(first[0]) + chr(second)) === nfd(chr(cp))) {
        found = [first[0], second, cp];
      }
    }
    if (!found) throw new Error(`no composition pair for ${hex(cp)}`);
    out.push(found);
  }
  out.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  return out;
}

function emit(name, type, values, perLine) {
  const lines = [];
  for (let i = 0; i < values.length; i += perLine) {
    lines.push('    ' + values.slice(i, i + perLine).join(', ') + ',');
  }
  return `const ${type} ${name}[] = {\n${lines.join('\n')}\n};\n` +
         `const size_t ${name}Size = ${values.length};\n`;
}

const runs = categoryRuns();
const ranks = combiningRanks();
const decomps = decompositions();
const comps = compositions(decomps);
const decompOffsets = [];
const decompData = [];
for (const [cp, d] of decomps) {
  decompOffsets.push(`{${hex(cp)}, ${decompData.length}, ${d.length}}`);
  decompData.push(...d.map(hex));
}

process.stdout.write(`// Generated by tokenizer/tools/gen_unicode_data.js from Node ${process.versions.node}
// (ICU ${process.versions.icu}, Unicode ${process.versions.unicode}). Do not edit.
// clang-format off
#include "tokenizer/unicode_data.h"

namespace lockstep::tok::unicode_data {

${emit('kCategoryRuns', 'uint32_t', runs.map(hex), 8)}
${emit('kCombiningRanks', 'CombiningRank', ranks.map(([c, r]) => `{${hex(c)}, ${r}}`), 6)}
${emit('kDecompositions', 'Decomposition', decompOffsets, 4)}
${emit('kDecompositionData', 'uint32_t', decompData, 10)}
${emit('kCompositions', 'Composition', comps.map(([a, b, c]) => `{${hex(a)}, ${hex(b)}, ${hex(c)}}`), 3)}
}  // namespace lockstep::tok::unicode_data
`);
