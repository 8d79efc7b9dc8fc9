// The benchmark corpus (benchmarks/corpus/*.md), read the way benchmarks/_corpus.py
// reads it: model-shaped answers (headings, lists, tables, code, math, CJK, emoji),
// and the stream of N pieces made from them. Scenarios use it to know the text a
// kernel cell streamed (the cell builds it with _corpus.corpus_pieces); a test
// (tests/test_corpus.py) checks that both sides give the same text.
//
//   import { answers, corpusText } from './corpus.mjs';
//   corpusText(1500, 3)   // 1,500 pieces of the answers from the 4th on

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const CORPUS_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'benchmarks', 'corpus');
export const SEPARATOR = '\n\n';

const CJK = '\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff\\uff00-\\uffef\\u3000-\\u303f';
// Python's [^\W\d_] is a letter or a non-decimal number; \d a decimal digit; \w adds _
const LETTER = '[\\p{L}\\p{Nl}\\p{No}]';
const PIECE = new RegExp(
  `\\n+|[^\\S\\n]*(?:[${CJK}]{1,2}|(?:(?![${CJK}])${LETTER}){1,6}|\\p{Nd}{1,3}` +
    `|(?:(?![${CJK}])[^\\p{L}\\p{N}_\\s]){1,3}|_+)|[^\\S\\n]+`,
  'gu',
);

const stripNewlines = (s) => s.replace(/^\n+|\n+$/g, '');

let cached = null;

/** Every answer, in the order of its file name: { name, text, reasoning }. */
export function answers() {
  if (cached) return cached;
  const files = fs.readdirSync(CORPUS_DIR).filter((f) => f.endsWith('.md') && !f.endsWith('.reasoning.md'));
  // Python sorts paths by code point; so does this (no locale)
  files.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  cached = files.map((f) => {
    const stem = f.slice(0, -3);
    const reasoningFile = path.join(CORPUS_DIR, `${stem}.reasoning.md`);
    return {
      name: stem,
      text: stripNewlines(fs.readFileSync(path.join(CORPUS_DIR, f), 'utf8')),
      reasoning: fs.existsSync(reasoningFile) ? stripNewlines(fs.readFileSync(reasoningFile, 'utf8')) : '',
    };
  });
  if (cached.length === 0) throw new Error(`no answers in ${CORPUS_DIR}`);
  return cached;
}

/** `text` in tokenizer-sized pieces (benchmarks/_corpus.py split_pieces). */
export function splitPieces(text) {
  const pieces = text.match(PIECE) ?? [];
  if (pieces.reduce((n, p) => n + p.length, 0) !== text.length) throw new Error('splitPieces lost characters');
  return pieces;
}

/** Exactly `pieces` pieces of the answers from answer `start` on (cycling). */
export function corpusPieces(pieces, start = 0) {
  const all = answers();
  const out = [];
  for (let i = start; out.length < pieces; i++) {
    if (out.length > 0) out.push(SEPARATOR);
    out.push(...splitPieces(all[i % all.length].text));
  }
  return out.slice(0, pieces);
}

/** The text of corpusPieces. */
export function corpusText(pieces, start = 0) {
  return corpusPieces(pieces, start).join('');
}

// `node corpus.mjs PIECES START`: print the text (the cross-check with Python)
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [pieces, start] = process.argv.slice(2).map(Number);
  process.stdout.write(JSON.stringify({ text: corpusText(pieces, start || 0), answers: answers().length }));
}
