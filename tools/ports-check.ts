/**
 * The ports rule (docs/design.md, 'The one rule'), enforced.
 *
 * `impl/` is the system under test and must run unchanged in every world, so it may touch the
 * outside world only through the ports in `impl/host/` (adapted for real in `impl/linux/`):
 *
 * - no file in `impl/` may import anything outside `impl/` except npm packages and Node's
 *   built-in modules (so never `sim/`, `e2e/`, `scenarios/`);
 * - outside `impl/host/` and `impl/linux/`, no direct time, randomness, process, file or socket
 *   access: timers, `Date.now`, `new Date()`, `Math.random`, `performance`, `process`,
 *   `child_process`, `net`, `dgram`, `fs`, `http(s)`, `tls`, `fetch`, random `crypto` calls.
 *
 * Globals are recognised with the type checker, so a local variable or an imported port that
 * happens to be called `setTimeout` is not a violation, and `clock.now()` is fine.
 */
import * as path from 'node:path';
import * as fs from 'node:fs';
import ts from 'typescript';

export interface PortsViolation {
  readonly file: string; // relative to the checked root
  readonly line: number;
  readonly column: number;
  readonly rule: 'foreign-import' | 'forbidden-module' | 'forbidden-global';
  readonly message: string;
}

/** Directories under impl/ that are allowed to reach the world directly. */
const ADAPTER_DIRS = ['impl/host', 'impl/linux'];

/** Node built-ins that do I/O, time or process control (matched with and without `node:`). */
const FORBIDDEN_MODULES = new Set([
  'child_process', 'net', 'dgram', 'fs', 'fs/promises', 'timers', 'timers/promises', 'http', 'https',
  'http2', 'tls', 'worker_threads', 'cluster', 'process', 'os', 'readline', 'dns', 'dns/promises',
  'perf_hooks', 'inspector', 'v8', 'vm',
]);

/** Named imports from `crypto` that read randomness. Hashing stays allowed. */
const FORBIDDEN_CRYPTO_NAMES = new Set([
  'randomBytes', 'randomUUID', 'randomInt', 'randomFill', 'randomFillSync', 'getRandomValues', 'webcrypto',
]);

/** Globals that are forbidden outright, whatever is done with them. */
const FORBIDDEN_GLOBALS = new Set([
  'setTimeout', 'setInterval', 'setImmediate', 'clearTimeout', 'clearInterval', 'clearImmediate',
  'performance', 'process', 'require', 'fetch', 'WebSocket', 'XMLHttpRequest', 'crypto',
]);

export function checkPorts(root: string): PortsViolation[] {
  const implDir = path.join(root, 'impl');
  const files = listTsFiles(implDir);
  if (files.length === 0) return [];
  const program = ts.createProgram(files, {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: ['node'],
    typeRoots: [path.join(process.cwd(), 'node_modules', '@types')],
  });
  const checker = program.getTypeChecker();
  const ownFiles = new Set(files.map((f) => path.resolve(f)));
  const violations: PortsViolation[] = [];

  for (const file of files) {
    const sf = program.getSourceFile(file);
    if (!sf) continue;
    const rel = path.relative(root, file).split(path.sep).join('/');
    const isAdapter = ADAPTER_DIRS.some((d) => rel.startsWith(d + '/'));
    const report = (node: ts.Node, rule: PortsViolation['rule'], message: string): void => {
      const { line, character } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
      violations.push({ file: rel, line: line + 1, column: character + 1, rule, message });
    };

    const checkSpecifier = (node: ts.Node, spec: string, importedNames: readonly string[]): void => {
      if (spec.startsWith('.') || spec.startsWith('/')) {
        const target = path.resolve(path.dirname(file), spec);
        const relTarget = path.relative(implDir, target);
        if (relTarget.startsWith('..') || path.isAbsolute(relTarget)) {
          const top = path.relative(root, target).split(path.sep)[0] ?? spec;
          report(node, 'foreign-import',
            `impl/ may not import from ${top}/ ('${spec}'); move the shared piece into impl/api or reach it through a port in impl/host`);
        }
        return;
      }
      if (isAdapter) return;
      const bare = spec.startsWith('node:') ? spec.slice(5) : spec;
      if (FORBIDDEN_MODULES.has(bare)) {
        report(node, 'forbidden-module',
          `'${spec}' may only be used in impl/host or impl/linux; use a port from impl/host instead`);
      }
      if (bare === 'crypto') {
        for (const n of importedNames) {
          if (FORBIDDEN_CRYPTO_NAMES.has(n) || n === '*') {
            report(node, 'forbidden-module',
              `'${n === '*' ? 'import * from crypto' : n}' reads randomness; take the Random port from impl/host instead`);
          }
        }
      }
    };

    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
        checkSpecifier(node, node.moduleSpecifier.text, importedNamesOf(node));
      } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
        checkSpecifier(node, node.moduleSpecifier.text, ['*']);
      } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)
        && ts.isStringLiteral(node.moduleReference.expression)) {
        checkSpecifier(node, node.moduleReference.expression.text, ['*']);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const arg = node.arguments[0];
        if (arg && ts.isStringLiteralLike(arg)) checkSpecifier(node, arg.text, ['*']);
        else report(node, 'foreign-import', 'dynamic import() with a computed specifier cannot be checked; use a static import');
      } else if (!isAdapter && ts.isIdentifier(node) && isValueReference(node)) {
        const name = node.text;
        if (FORBIDDEN_GLOBALS.has(name) || name === 'Date' || name === 'Math') {
          if (isGlobal(node, checker, ownFiles)) checkGlobalUse(node, name, report);
        }
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }
  return violations;
}

function checkGlobalUse(
  node: ts.Identifier,
  name: string,
  report: (n: ts.Node, rule: PortsViolation['rule'], msg: string) => void,
): void {
  const parent = node.parent;
  if (name === 'Math') {
    if (ts.isPropertyAccessExpression(parent) && parent.expression === node && parent.name.text === 'random') {
      report(parent, 'forbidden-global', 'Math.random is forbidden in impl/; take the Random port from impl/host');
    } else if (ts.isElementAccessExpression(parent) && parent.expression === node) {
      report(parent, 'forbidden-global', 'computed access on Math cannot be checked; use Math.<name> or the Random port');
    }
    return;
  }
  if (name === 'Date') {
    if (ts.isPropertyAccessExpression(parent) && parent.expression === node && parent.name.text === 'now') {
      report(parent, 'forbidden-global', 'Date.now is forbidden in impl/; take the Clock port from impl/host');
    } else if (ts.isNewExpression(parent) && parent.expression === node && (parent.arguments?.length ?? 0) === 0) {
      report(parent, 'forbidden-global', 'new Date() reads the wall clock; take the Clock port from impl/host');
    } else if (ts.isCallExpression(parent) && parent.expression === node) {
      report(parent, 'forbidden-global', 'Date() reads the wall clock; take the Clock port from impl/host');
    } else if (ts.isElementAccessExpression(parent) && parent.expression === node) {
      report(parent, 'forbidden-global', 'computed access on Date cannot be checked; use the Clock port');
    }
    return;
  }
  report(node, 'forbidden-global', `global '${name}' is forbidden in impl/ outside impl/host and impl/linux; use a port from impl/host`);
}

/** True when the identifier is read as a value (not a property name, declaration name or type). */
function isValueReference(node: ts.Identifier): boolean {
  const p = node.parent;
  if (ts.isPropertyAccessExpression(p) && p.name === node) {
    // `globalThis.setTimeout` and `window.x` still count as the global.
    return ts.isIdentifier(p.expression) && p.expression.text === 'globalThis';
  }
  if ((ts.isPropertyAssignment(p) || ts.isPropertyDeclaration(p) || ts.isPropertySignature(p)
    || ts.isMethodDeclaration(p) || ts.isMethodSignature(p) || ts.isGetAccessor(p) || ts.isSetAccessor(p)
    || ts.isEnumMember(p)) && p.name === node) return false;
  if ((ts.isVariableDeclaration(p) || ts.isParameter(p) || ts.isFunctionDeclaration(p) || ts.isClassDeclaration(p)
    || ts.isBindingElement(p) || ts.isImportSpecifier(p) || ts.isImportClause(p) || ts.isNamespaceImport(p)
    || ts.isTypeAliasDeclaration(p) || ts.isInterfaceDeclaration(p)) && p.name === node) return false;
  if (ts.isBindingElement(p) && p.propertyName === node) return false;
  if (ts.isImportSpecifier(p) || ts.isExportSpecifier(p)) return false;
  if (ts.isTypeReferenceNode(p) || ts.isQualifiedName(p) || ts.isTypeQueryNode(p)) return false;
  return true;
}

function isGlobal(node: ts.Identifier, checker: ts.TypeChecker, ownFiles: Set<string>): boolean {
  const symbol = checker.getSymbolAtLocation(node);
  if (!symbol) return true; // unresolved: can only be an ambient global
  const decls = symbol.getDeclarations() ?? [];
  if (decls.length === 0) return true;
  return decls.every((d) => !ownFiles.has(path.resolve(d.getSourceFile().fileName)));
}

function importedNamesOf(node: ts.ImportDeclaration): string[] {
  const clause = node.importClause;
  if (!clause) return [];
  const names: string[] = [];
  if (clause.name) names.push('*'); // default import: the whole module
  const b = clause.namedBindings;
  if (b && ts.isNamespaceImport(b)) names.push('*');
  if (b && ts.isNamedImports(b)) for (const e of b.elements) names.push((e.propertyName ?? e.name).text);
  return names;
}

function listTsFiles(dir: string): string[] {
  if (!fs.existsSync(dir)) return [];
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...listTsFiles(full));
    else if (entry.isFile() && /\.(ts|mts|cts|tsx)$/.test(entry.name) && !entry.name.endsWith('.d.ts')) out.push(full);
  }
  return out.sort();
}

export function formatViolations(violations: readonly PortsViolation[]): string {
  return violations.map((v) => `${v.file}:${v.line}:${v.column}  ${v.rule}  ${v.message}`).join('\n');
}
