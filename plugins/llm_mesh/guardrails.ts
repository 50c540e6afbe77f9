import { problems, z } from '../../kernel/plugin-api.ts';
import { compilePattern, findPattern, findPii, PII_KINDS, type Finding, type PiiKind } from './pii.ts';
import type { ChatMessage, GuardrailOutcome, ToolCall } from './public.ts';

const STAGES = ['prompt', 'answer'] as const;
type Stage = (typeof STAGES)[number];
const piiAction = z.enum(['reject', 'redact', 'hash', 'allow']);
type PiiAction = z.infer<typeof piiAction>;
const stages = z.array(z.enum(STAGES)).min(1).default([...STAGES]).describe('Where it applies: the prompt (before the model sees it), the answer (before the caller does), or both');

/** A connection's guardrails, as saved and answered. */
export const guardrailsSchema = z
  .object({
    pii: z
      .object({
        kinds: z.array(z.enum(PII_KINDS)).default([...PII_KINDS]).describe('What is looked for: e-mail addresses, phone numbers, payment cards (Luhn-checked), IBANs (checksum-checked), IP addresses'),
        action: piiAction.default('redact').describe('reject: 400 naming the kind; redact: replaced by [KIND]; hash: replaced by [KIND:<keyed hash>] (the same value, the same hash); allow: recorded only'),
        actions: z.partialRecord(z.enum(PII_KINDS), piiAction).default({}).describe('An action per kind, over `action`'),
        custom_patterns: z
          .array(
            z
              .object({
                name: z.string().regex(/^[a-z][a-z0-9_]{0,40}$/, 'must be a lower-case identifier such as employee_id'),
                pattern: z.string().min(1).max(500).describe('RE2 syntax (linear time: no backtracking)'),
                action: piiAction.default('redact'),
              })
              .strict(),
          )
          .max(50)
          .default([]),
        stages,
      })
      .strict()
      .nullable()
      .default(null),
    forbidden_terms: z
      .object({
        terms: z.array(z.string().trim().min(1).max(200)).min(1).max(500).describe('Matched as whole words, ignoring case'),
        action: z.enum(['reject', 'redact']).default('reject'),
        stages,
      })
      .strict()
      .nullable()
      .default(null),
    prompt_injection: z
      .object({ action: z.enum(['flag', 'reject']).default('flag').describe('flag: the call goes on, the outcome says so and is audited; reject: 400') })
      .strict()
      .nullable()
      .default(null),
    max_prompt_chars: z.number().int().min(1).max(10_000_000).nullable().default(null).describe('The longest prompt (all messages\u2019 text) sent; longer is a 400'),
  })
  .strict()
  .meta({ id: 'LlmGuardrails' });
export type Guardrails = z.output<typeof guardrailsSchema>;

/**
 * Phrasings of the usual attempts to override a model's instructions (OWASP LLM01): told to ignore
 * its instructions, to reveal them, to become an unrestricted persona, or given a forged system turn.
 * A heuristic: it flags, it does not prove.
 */
const INJECTION_PATTERNS = [
  /\b(?:ignore|disregard|forget|override|bypass)\b.{0,40}\b(?:previous|prior|above|earlier|preceding|all|your|the system)\b.{0,20}\b(?:instructions?|prompts?|rules|directions|guidelines|messages?)\b/is,
  /\b(?:reveal|print|show|repeat|output|leak|tell me)\b.{0,30}\b(?:system prompt|hidden prompt|initial instructions|your instructions)\b/is,
  /\byou are (?:now|no longer)\b.{0,30}\b(?:DAN|jailbroken|unrestricted|unfiltered|developer mode|free of)\b/is,
  /\b(?:do anything now|jailbreak|developer mode enabled)\b/i,
  /(?:<\|im_start\|>\s*system|\[\[?system\]\]?:|^#{2,}\s*(?:system|new instructions)\b|\bnew instructions:)/im,
];

/** What checking a text found, and the text as it may go on. */
interface Checked {
  text: string;
  outcomes: GuardrailOutcome[];
}

/** A guardrail as it runs: what it finds in a text, and what is done with each kind found. */
type Rule = { guardrail: GuardrailOutcome['guardrail']; actionOf: (kind: string) => PiiAction; find: (text: string) => Finding[] };

export interface GuardrailChecker {
  /** The messages as the model may see them (redacted or hashed), or a 400 naming what was rejected. */
  prompt(messages: ChatMessage[]): { messages: ChatMessage[]; outcomes: GuardrailOutcome[] };
  /** An answer (or a piece of a streamed one) as the caller may see it, or a 422 naming what was rejected. */
  answer(text: string): Checked;
  /**
   * The tool calls of an answer as a tool may receive them: each string (and number) in their JSON
   * arguments checked as answer text is, or a 422. What a model hands a tool leaves the platform as
   * surely as what it says (a workflow, a message), so the answer's rules hold for it too.
   */
  toolCalls(calls: ToolCall[]): { calls: ToolCall[]; outcomes: GuardrailOutcome[] };
  /** Texts to embed, as the prompt is checked. */
  inputs(texts: string[]): { texts: string[]; outcomes: GuardrailOutcome[] };
  /** Whether anything is checked in answers (a stream is then released a sentence at a time). */
  readonly checksAnswers: boolean;
}

/** A value as its hash is made of: one number or address however it was written (spaced, dashed, in capitals). */
const canonical = (kind: string, value: string) => (kind === 'iban' || kind === 'payment_card' || kind === 'phone' ? value.replace(/[^0-9A-Za-z+]/g, '').toUpperCase() : value.toLowerCase());

const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Compiles a connection's guardrails once; `hash` keys the hashes (the platform's keyed HMAC). */
export function guardrailChecker(guardrails: Guardrails, hash: (text: string) => string): GuardrailChecker {
  const rulesOf = (stage: Stage): Rule[] => {
    const rules: Rule[] = [];
    const { pii, forbidden_terms: terms } = guardrails;
    if (pii?.stages.includes(stage)) {
      // The kinds are found together, so a span is one kind only (an IP address is not also a phone number).
      if (pii.kinds.length) rules.push({ guardrail: 'pii', actionOf: (kind) => pii.actions[kind as PiiKind] ?? pii.action, find: (text) => findPii(text, pii.kinds) });
      for (const custom of pii.custom_patterns) {
        const compiled = compilePattern(custom.pattern);
        rules.push({ guardrail: 'custom_pattern', actionOf: () => custom.action, find: (text) => findPattern(compiled, text, custom.name) });
      }
    }
    if (terms?.stages.includes(stage)) {
      const pattern = new RegExp(`(?<![\\p{L}\\p{N}])(?:${terms.terms.map(escapeRegExp).join('|')})(?![\\p{L}\\p{N}])`, 'giu');
      rules.push({ guardrail: 'forbidden_terms', actionOf: () => terms.action, find: (text) => [...text.matchAll(pattern)].map((m) => ({ kind: 'term', start: m.index, end: m.index + m[0].length })) });
    }
    return rules;
  };
  const promptRules = rulesOf('prompt');
  const answerRules = rulesOf('answer');

  const replacement = (kind: string, action: PiiAction, value: string) => {
    const label = kind.toUpperCase();
    return action === 'hash' ? `[${label}:${hash(`${kind}:${canonical(kind, value)}`).slice(0, 12)}]` : `[${label}]`;
  };

  /** One text through the rules: outcomes counted per kind, the text rewritten; `reject` names the first kind rejected. */
  function check(text: string, rules: Rule[], stage: Stage, reject: (rule: Rule, kind: string) => never): Checked {
    const outcomes: GuardrailOutcome[] = [];
    let current = text;
    for (const rule of rules) {
      const found = rule.find(current);
      if (!found.length) continue;
      for (const kind of new Set(found.map((f) => f.kind))) {
        outcomes.push({ guardrail: rule.guardrail, stage, kind, action: rule.actionOf(kind), count: found.filter((f) => f.kind === kind).length });
      }
      const rejected = found.find((f) => rule.actionOf(f.kind) === 'reject');
      if (rejected) reject(rule, rejected.kind);
      let rewritten = '';
      let at = 0;
      for (const finding of found) {
        const action = rule.actionOf(finding.kind);
        if (action === 'allow') continue;
        rewritten += current.slice(at, finding.start) + replacement(finding.kind, action, current.slice(finding.start, finding.end));
        at = finding.end;
      }
      current = rewritten + current.slice(at);
    }
    return { text: current, outcomes };
  }

  const described = (rule: Rule, kind: string) => (rule.guardrail === 'pii' ? `PII of kind ${kind}` : rule.guardrail === 'custom_pattern' ? `text matching the pattern "${kind}"` : 'a forbidden term');

  function checkPromptTexts<T>(items: T[], textOf: (item: T) => string | null, at: (index: number) => string) {
    const outcomes: GuardrailOutcome[] = [];
    const texts = items.map((item, index) => {
      const text = textOf(item);
      if (text === null) return null;
      const checked = check(text, promptRules, 'prompt', (rule, kind) => {
        throw problems.badRequest(`${at(index)}: the prompt contains ${described(rule, kind)}, which this connection\u2019s guardrails reject`, [{ path: at(index), message: `${rule.guardrail}: ${kind}` }]);
      });
      outcomes.push(...checked.outcomes);
      return checked.text;
    });
    return { texts, outcomes: merged(outcomes) };
  }

  function checkSize(total: number) {
    const max = guardrails.max_prompt_chars;
    if (max !== null && total > max) {
      throw problems.badRequest(`the prompt is ${total} characters, over this connection\u2019s max_prompt_chars (${max})`, [{ path: 'body.messages', message: `max_prompt_size: ${total} > ${max}` }]);
    }
  }

  return {
    checksAnswers: answerRules.length > 0,
    prompt(messages) {
      checkSize(messages.reduce((sum, m) => sum + (m.content?.length ?? 0), 0));
      const { texts, outcomes } = checkPromptTexts(messages, (m) => m.content, (i) => `body.messages.${i}.content`);
      const injection = guardrails.prompt_injection;
      if (injection) {
        // The caller's and the tools' words, not the system prompt the platform or the developer wrote.
        const hits = messages.filter((m) => (m.role === 'user' || m.role === 'tool') && m.content && INJECTION_PATTERNS.some((p) => p.test(m.content!))).length;
        if (hits) {
          outcomes.push({ guardrail: 'prompt_injection', stage: 'prompt', kind: 'injection', action: injection.action === 'reject' ? 'reject' : 'flag', count: hits });
          if (injection.action === 'reject') throw problems.badRequest('the prompt reads as an attempt to override the model\u2019s instructions (prompt injection), which this connection\u2019s guardrails reject', [{ path: 'body.messages', message: 'prompt_injection' }]);
        }
      }
      return { messages: messages.map((m, i) => (texts[i] === null || texts[i] === m.content ? m : { ...m, content: texts[i] })), outcomes };
    },
    answer(text) {
      return check(text, answerRules, 'answer', (rule, kind) => {
        throw problems.unprocessable(`the model\u2019s answer contains ${described(rule, kind)}, which this connection\u2019s guardrails reject; it was not passed on`, [{ path: 'answer', message: `${rule.guardrail}: ${kind}` }]);
      });
    },
    toolCalls(calls) {
      const outcomes: GuardrailOutcome[] = [];
      const checkedText = (text: string, path: string) => {
        const checked = check(text, answerRules, 'answer', (rule, kind) => {
          throw problems.unprocessable(`the model asked for a tool with arguments containing ${described(rule, kind)}, which this connection\u2019s guardrails reject; it was not passed on`, [{ path, message: `${rule.guardrail}: ${kind}` }]);
        });
        outcomes.push(...checked.outcomes);
        return checked.text;
      };
      const checkedCalls = calls.map((call, i) => {
        const path = `answer.tool_calls.${i}.arguments`;
        let args: unknown;
        try {
          args = JSON.parse(call.arguments);
        } catch {
          // Not JSON: checked as the text it is (the tool will refuse it anyway).
          return { ...call, arguments: checkedText(call.arguments, path) };
        }
        return { ...call, arguments: JSON.stringify(mapScalars(args, (text) => checkedText(text, path))) };
      });
      return { calls: checkedCalls, outcomes: merged(outcomes) };
    },
    inputs(texts) {
      checkSize(texts.reduce((sum, t) => sum + t.length, 0));
      const checked = checkPromptTexts(texts, (t) => t, (i) => `body.input.${i}`);
      return { texts: checked.texts as string[], outcomes: checked.outcomes };
    },
  };
}

/**
 * A JSON value with each string, and each number as its text, passed through `rewrite`: a number the
 * rewrite changes (a card number redacted) becomes the rewritten text. Object keys, which name
 * arguments, are kept.
 */
function mapScalars(value: unknown, rewrite: (text: string) => string): unknown {
  if (typeof value === 'string') return rewrite(value);
  if (typeof value === 'number') {
    const text = String(value);
    const rewritten = rewrite(text);
    return rewritten === text ? value : rewritten;
  }
  if (Array.isArray(value)) return value.map((item) => mapScalars(item, rewrite));
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, mapScalars(item, rewrite)]));
  return value;
}

/** Outcomes of one kind and action added up (a prompt of several messages, a stream of several pieces). */
export function merged(outcomes: GuardrailOutcome[]): GuardrailOutcome[] {
  const byKey = new Map<string, GuardrailOutcome>();
  for (const outcome of outcomes) {
    const key = `${outcome.guardrail} ${outcome.stage} ${outcome.kind} ${outcome.action}`;
    const known = byKey.get(key);
    if (known) known.count += outcome.count;
    else byKey.set(key, { ...outcome });
  }
  return [...byKey.values()];
}

/** A custom pattern RE2 cannot compile, as a field error of the connection's body (null: all compile). */
export function patternErrors(guardrails: Guardrails, at: string) {
  return (guardrails.pii?.custom_patterns ?? []).flatMap((custom, i) => {
    try {
      compilePattern(custom.pattern);
      return [];
    } catch (err) {
      return [{ path: `${at}.pii.custom_patterns.${i}.pattern`, message: `not a valid RE2 pattern: ${(err as Error).message.slice(0, 200)}` }];
    }
  });
}
