/**
 * The published JSON Schemas (docs/schemas/), compiled once with ajv for the tests that
 * validate real command outputs against them.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO } from './cli-run.js';

export const SCHEMAS = ['counterexample', 'check-report', 'replay-report', 'trace-report'] as const;
export type SchemaName = (typeof SCHEMAS)[number];

export function readSchema(n: SchemaName): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(REPO, 'docs', 'schemas', `${n}.schema.json`), 'utf8')) as Record<
    string,
    unknown
  >;
}

// strict: unknown keywords and type-less keywords are schema bugs. strictRequired is off: the
// if/then branches require properties the enclosing schema defines.
const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true });
for (const n of SCHEMAS) ajv.addSchema(readSchema(n));

function validator(n: SchemaName): ValidateFunction {
  const v = ajv.getSchema(`https://ambient-lab.example/schemas/${n}.schema.json`);
  if (!v) throw new Error(`schema ${n} did not compile`);
  return v;
}

/** Undefined when `doc` is valid, else ajv's errors as text. */
export function schemaErrors(n: SchemaName, doc: unknown): string | undefined {
  const v = validator(n);
  return v(doc) ? undefined : ajv.errorsText(v.errors, { separator: '\n' });
}
