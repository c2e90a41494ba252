// Copyright 2026 the @idempotent/http authors. MIT license.
/**
 * Reading the documents' code blocks, for tests/readme_test.ts and
 * tests/operations_test.ts: fenced blocks with their `<!-- readme-test: … -->`
 * markers, shell words, `$NAME` expansion, and matching `# ` lines against a
 * command's output.
 *
 * @module
 */

const MARKER = /^<!--\s*readme-test:\s*(.*?)\s*-->$/;
const FENCE = /^(\s*)(`{3,}|~{3,})\s*([^\s`]*)?.*$/;

/** One fenced block of the README. */
export interface Block {
  /** The document it is in, as the repository names it (`README.md`). */
  file: string;
  /** 1-based line of the opening fence. */
  line: number;
  /** The language, the first word of the info string (`ts`, `sh`, …). */
  lang: string;
  /** The lines between the fences, indentation of the fence removed. */
  text: string;
  /** The marker's words (`["file", "main.ts"]`), or null when unmarked. */
  marker: string[] | null;
}

/**
 * Splits a Markdown text into its fenced blocks, each with the marker that
 * precedes it.
 *
 * @param markdown The text.
 * @param file The document's path, for messages.
 * @returns The blocks, in order.
 */
export function fencedBlocks(markdown: string, file = "README.md"): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i]!);
    if (open === null) continue;
    const [, indent = "", fence = "", lang = ""] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      if (l.trim().startsWith(fence) && l.trim().replace(/[`~]/g, "") === "") {
        break;
      }
      body.push(l.startsWith(indent) ? l.slice(indent.length) : l.trimStart());
    }
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === "") k--;
    const marked = k >= 0 ? MARKER.exec(lines[k]!.trim()) : null;
    blocks.push({
      file,
      line: i + 1,
      lang,
      text: body.join("\n"),
      marker: marked ? marked[1]!.split(/\s+/).filter(Boolean) : null,
    });
    i = j;
  }
  return blocks;
}

/**
 * Splits a shell command line into words: single and double quotes group,
 * an unquoted `#` after a space starts a comment.
 *
 * @param line The command line.
 * @returns The words.
 */
export function shellWords(line: string): string[] {
  const words: string[] = [];
  let word: string | null = null;
  let quote: "'" | '"' | null = null;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote !== null) {
      if (c === quote) quote = null;
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      word ??= "";
    } else if (c === " " || c === "\t") {
      if (word !== null) words.push(word);
      word = null;
    } else if (c === "#" && word === null) {
      break;
    } else {
      word = (word ?? "") + c;
    }
  }
  if (quote !== null) throw new SyntaxError(`Unclosed quote in: ${line}`);
  if (word !== null) words.push(word);
  return words;
}

/** Whether each expected line equals a line of `output`, in order. */
export function matchOutput(output: string, expected: string[]): string | null {
  const lines = output.replaceAll("\r", "").split("\n").map((l) => l.trim());
  let at = 0;
  for (const want of expected) {
    const pattern = new RegExp(
      `^${
        want.trim().split("…").map((p) =>
          p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
        )
          .join(".*")
      }$`,
    );
    while (at < lines.length && !pattern.test(lines[at]!)) at++;
    if (at === lines.length) {
      return `expected a line ${JSON.stringify(want)} in:\n${output}`;
    }
    at++;
  }
  return null;
}

/** Expands `$NAME` and `"$NAME"` in a command line, then splits it into words. */
export function expandWords(
  line: string,
  vars: Record<string, string>,
): string[] {
  const value = (name: string) => {
    const v = vars[name];
    if (v === undefined) throw new Error(`$${name} is not set in: ${line}`);
    return v;
  };
  // Quoted: one word (re-quoted); unquoted: the value's words.
  const quoted = line.replace(
    /"\$([A-Z_][A-Z0-9_]*)"/g,
    (_, n) => `'${value(n)}'`,
  );
  return shellWords(
    quoted.replace(/\$([A-Z_][A-Z0-9_]*)/g, (_, n) => value(n)),
  );
}
