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
 *
 * The layering inside `impl/` and around it (rule `layer-import`, type-only imports included):
 *
 * - the shared vocabulary `impl/api/` imports only `impl/api/`;
 * - a port (`impl/host/`) never imports a component (`impl/node-agent`, `impl/cni-plugin`,
 *   `impl/ztunnel`) or the Linux adapters (`impl/linux`);
 * - components never import each other: what two of them share lives in `impl/api/`;
 * - `sim/` never imports `impl/linux/` (the sim is a world of its own; pure shared code belongs
 *   in `impl/api/`);
 * - `scenarios/` never imports a world implementation, the CLI, a test or a bench (`e2e/`,
 *   `cli/`, `tests/`, `bench/`): the top passes world factories in (e2e/world-modules.ts);
 * - `bench/` imports no test fixture (`tests/`): what a bench and a test share lives outside
 *   `tests/`.
 *
 * Violations not yet moved are listed in LAYER_EXCEPTIONS, each with its reason, so the list can
 * only shrink; an exception that no longer matches anything is itself reported.
 */
import * as path from 'node:path';
import * as fs from 'node:fs';
import ts from 'typescript';

interface PortsViolation {
  readonly file: string; // relative to the checked root
  readonly line: number;
  readonly column: number;
  readonly rule: 'foreign-import' | 'forbidden-module' | 'forbidden-global' | 'layer-import' | 'stale-exception';
  readonly message: string;
}

/** Directories under impl/ that are allowed to reach the world directly. */
const ADAPTER_DIRS = ['impl/host', 'impl/linux'];

/** The components of impl/: each may import impl/api, impl/host and itself, never another one. */
const COMPONENT_DIRS = ['impl/node-agent', 'impl/cni-plugin', 'impl/ztunnel', 'impl/mesh-ca'];

/**
 * Known layering violations not moved yet (issue #24), as `from` file → `to` file, both relative
 * to the root with `.ts`. Each needs a reason; remove the entry when the import is gone.
 */
interface LayerException {
  readonly from: string;
  readonly to: string;
  readonly why: string;
}

export const LAYER_EXCEPTIONS: readonly LayerException[] = [];

/** Node built-ins that do I/O, time or process control (matched with and without `node:`). */
const FORBIDDEN_MODULES = new Set([
  'child_process',
  'net',
  'dgram',
  'fs',
  'fs/promises',
  'timers',
  'timers/promises',
  'http',
  'https',
  'http2',
  'tls',
  'worker_threads',
  'cluster',
  'process',
  'os',
  'readline',
  'dns',
  'dns/promises',
  'perf_hooks',
  'inspector',
  'v8',
  'vm',
]);

/** Named imports from `crypto` that read randomness. Hashing stays allowed. */
const FORBIDDEN_CRYPTO_NAMES = new Set([
  'randomBytes',
  'randomUUID',
  'randomInt',
  'randomFill',
  'randomFillSync',
  'getRandomValues',
  'webcrypto',
]);

/** Globals that are forbidden outright, whatever is done with them. */
const FORBIDDEN_GLOBALS = new Set([
  'setTimeout',
  'setInterval',
  'setImmediate',
  'clearTimeout',
  'clearInterval',
  'clearImmediate',
  'performance',
  'process',
  'require',
  'fetch',
  'WebSocket',
  'XMLHttpRequest',
  'crypto',
]);

export function checkPorts(root: string, exceptions: readonly LayerException[] = LAYER_EXCEPTIONS): PortsViolation[] {
  const layer = new LayerCheck(root, exceptions);
  const violations = [...checkImpl(root, layer), ...IMPORT_CHECKED_DIRS.flatMap((d) => checkImportsOf(root, d, layer))];
  violations.push(...layer.staleExceptions());
  return violations;
}

/** The layering rules above, with their exceptions; `used` records which exceptions matched. */
class LayerCheck {
  private readonly used = new Set<string>();
  constructor(
    private readonly root: string,
    private readonly exceptions: readonly LayerException[],
  ) {}

  /** Why `fromRel` may not import `toRel` (both root-relative, `/`-separated), or undefined. */
  violation(fromRel: string, toRel: string): string | undefined {
    const why = layerRule(fromRel, toRel);
    if (why === undefined) return undefined;
    const target = withTs(toRel);
    const exception = this.exceptions.find((e) => e.from === fromRel && e.to === target);
    if (exception) {
      this.used.add(`${exception.from} -> ${exception.to}`);
      return undefined;
    }
    return why;
  }

  /** Exceptions whose import is gone (only when their file is in the checked tree). */
  staleExceptions(): PortsViolation[] {
    return this.exceptions
      .filter((e) => !this.used.has(`${e.from} -> ${e.to}`) && fs.existsSync(path.join(this.root, e.from)))
      .map((e) => ({
        file: e.from,
        line: 1,
        column: 1,
        rule: 'stale-exception' as const,
        message: `the layering exception ${e.from} -> ${e.to} no longer occurs; remove it from LAYER_EXCEPTIONS`,
      }));
  }
}

function under(rel: string, dir: string): boolean {
  return rel.startsWith(dir + '/');
}

function withTs(rel: string): string {
  return rel.replace(/\.(m|c)?js$/, '.$1ts');
}

function layerRule(fromRel: string, toRel: string): string | undefined {
  if (under(fromRel, 'impl/api') && under(toRel, 'impl') && !under(toRel, 'impl/api')) {
    return `impl/api is shared vocabulary and imports only impl/api ('${toRel}')`;
  }
  if (under(fromRel, 'impl/host') && [...COMPONENT_DIRS, 'impl/linux'].some((d) => under(toRel, d))) {
    return `a port (impl/host) may not import a component or an adapter ('${toRel}'); move the shared piece into impl/api`;
  }
  const fromComponent = COMPONENT_DIRS.find((d) => under(fromRel, d));
  const toComponent = COMPONENT_DIRS.find((d) => under(toRel, d));
  if (fromComponent && toComponent && fromComponent !== toComponent) {
    return `components never import each other: ${fromComponent} imports ${toComponent} ('${toRel}'); move the shared piece into impl/api`;
  }
  if (under(fromRel, 'sim') && under(toRel, 'impl/linux')) {
    return `sim/ may not import impl/linux ('${toRel}'); move pure shared code into impl/api`;
  }
  if (under(fromRel, 'scenarios') && ['e2e', 'cli', 'tests', 'bench'].some((d) => under(toRel, d))) {
    return `scenarios/ may not import '${toRel}': a world implementation, the CLI, tests and benches sit above it; pass what it needs in from the top (e2e/world-modules.ts)`;
  }
  if (under(fromRel, 'bench') && under(toRel, 'tests')) {
    return `bench/ may not import a test fixture ('${toRel}'); move what both use out of tests/`;
  }
  return undefined;
}

/** The module specifiers of a file: imports, re-exports, import-equals, import() calls and types. */
function moduleSpecifiers(sf: ts.SourceFile): Array<{ node: ts.Node; spec: string }> {
  const out: Array<{ node: ts.Node; spec: string }> = [];
  const visit = (node: ts.Node): void => {
    if (
      (ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      out.push({ node, spec: node.moduleSpecifier.text });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      out.push({ node, spec: node.moduleReference.expression.text });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const arg = node.arguments[0];
      if (arg && ts.isStringLiteralLike(arg)) out.push({ node, spec: arg.text });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      out.push({ node, spec: node.argument.literal.text });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

/** Layering of every relative import in one parsed file. */
function checkLayering(root: string, file: string, sf: ts.SourceFile, layer: LayerCheck): PortsViolation[] {
  const rel = toRel(root, file);
  const out: PortsViolation[] = [];
  for (const { node, spec } of moduleSpecifiers(sf)) {
    if (!spec.startsWith('.')) continue;
    const why = layer.violation(rel, toRel(root, path.resolve(path.dirname(file), spec)));
    if (why === undefined) continue;
    const { line, character } = sf.getLineAndCharacterOfPosition(node.getStart(sf));
    out.push({ file: rel, line: line + 1, column: character + 1, rule: 'layer-import', message: why });
  }
  return out;
}

function toRel(root: string, file: string): string {
  return path.relative(root, file).split(path.sep).join('/');
}

/** Folders outside impl/ checked only for their imports (they may touch the world directly). */
const IMPORT_CHECKED_DIRS = ['sim', 'scenarios', 'bench'];

function checkImportsOf(root: string, dir: string, layer: LayerCheck): PortsViolation[] {
  const out: PortsViolation[] = [];
  for (const file of listTsFiles(path.join(root, dir))) {
    const sf = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    out.push(...checkLayering(root, file, sf, layer));
  }
  return out;
}

function checkImpl(root: string, layer: LayerCheck): PortsViolation[] {
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
    violations.push(...checkLayering(root, file, sf, layer));
    const rel = toRel(root, file);
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
          report(
            node,
            'foreign-import',
            `impl/ may not import from ${top}/ ('${spec}'); move the shared piece into impl/api or reach it through a port in impl/host`,
          );
        }
        return;
      }
      if (isAdapter) return;
      const bare = spec.startsWith('node:') ? spec.slice(5) : spec;
      if (FORBIDDEN_MODULES.has(bare)) {
        report(
          node,
          'forbidden-module',
          `'${spec}' may only be used in impl/host or impl/linux; use a port from impl/host instead`,
        );
      }
      if (bare === 'crypto') {
        for (const n of importedNames) {
          if (FORBIDDEN_CRYPTO_NAMES.has(n) || n === '*') {
            report(
              node,
              'forbidden-module',
              `'${n === '*' ? 'import * from crypto' : n}' reads randomness; take the Random port from impl/host instead`,
            );
          }
        }
      }
    };

    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
        checkSpecifier(node, node.moduleSpecifier.text, importedNamesOf(node));
      } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
        checkSpecifier(node, node.moduleSpecifier.text, ['*']);
      } else if (
        ts.isImportEqualsDeclaration(node) &&
        ts.isExternalModuleReference(node.moduleReference) &&
        ts.isStringLiteral(node.moduleReference.expression)
      ) {
        checkSpecifier(node, node.moduleReference.expression.text, ['*']);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        const arg = node.arguments[0];
        if (arg && ts.isStringLiteralLike(arg)) checkSpecifier(node, arg.text, ['*']);
        else
          report(
            node,
            'foreign-import',
            'dynamic import() with a computed specifier cannot be checked; use a static import',
          );
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
      report(
        parent,
        'forbidden-global',
        'computed access on Math cannot be checked; use Math.<name> or the Random port',
      );
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
  report(
    node,
    'forbidden-global',
    `global '${name}' is forbidden in impl/ outside impl/host and impl/linux; use a port from impl/host`,
  );
}

/** True when the identifier is read as a value (not a property name, declaration name or type). */
function isValueReference(node: ts.Identifier): boolean {
  const p = node.parent;
  if (ts.isPropertyAccessExpression(p) && p.name === node) {
    // `globalThis.setTimeout` and `window.x` still count as the global.
    return ts.isIdentifier(p.expression) && p.expression.text === 'globalThis';
  }
  if (
    (ts.isPropertyAssignment(p) ||
      ts.isPropertyDeclaration(p) ||
      ts.isPropertySignature(p) ||
      ts.isMethodDeclaration(p) ||
      ts.isMethodSignature(p) ||
      ts.isGetAccessor(p) ||
      ts.isSetAccessor(p) ||
      ts.isEnumMember(p)) &&
    p.name === node
  )
    return false;
  if (
    (ts.isVariableDeclaration(p) ||
      ts.isParameter(p) ||
      ts.isFunctionDeclaration(p) ||
      ts.isClassDeclaration(p) ||
      ts.isBindingElement(p) ||
      ts.isImportSpecifier(p) ||
      ts.isImportClause(p) ||
      ts.isNamespaceImport(p) ||
      ts.isTypeAliasDeclaration(p) ||
      ts.isInterfaceDeclaration(p)) &&
    p.name === node
  )
    return false;
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
