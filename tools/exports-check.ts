/**
 * The exports rule: a module exports only what another module imports. An export used only in
 * its own file hides the module's real surface from a reader; one used nowhere is dead code.
 *
 * Every TypeScript file of the project (tsconfig.json's `include`) is read with the type checker.
 * An export counts as used when another file imports it by name, re-exports it, or reaches its
 * whole module (`import * as`, `export *`, `import()` and `import('…')` types — conservatively,
 * all of that module's exports). Exports loaded by name at run time (a factory a world module
 * names as a string) are listed in RUNTIME_EXPORTS with the place that loads them.
 */
import * as path from 'node:path';
import ts from 'typescript';

export interface ExportFinding {
  readonly file: string; // relative to the root, `/`-separated
  readonly line: number;
  /** Where `export ` can be removed to make the declaration local (a declaration statement's own modifier), if it can. */
  readonly exportKeyword?: { readonly start: number; readonly end: number };
  readonly name: string;
  /** 'local': used only in its own file (drop `export`); 'unused': used nowhere (delete it). */
  readonly kind: 'local' | 'unused';
}

/**
 * Exports reached by name at run time rather than by an import, as `file#name` → who loads it.
 * An entry that names no export of the project is reported, so the list cannot go stale.
 */
const RUNTIME_EXPORTS: Readonly<Record<string, string>> = {
  'e2e/netns/world.ts#createNetnsWorldFactory':
    'e2e/world-modules.ts (check loads the factory by module URL and export name)',
  'e2e/containers/world.ts#createContainersWorldFactory':
    'e2e/world-modules.ts (check loads the factory by module URL and export name)',
  'e2e/kind/shared-cluster.ts#createSharedKindCluster':
    'e2e/world-modules.ts (check loads the factory by module URL and export name)',
};

export function checkExports(
  root: string,
  configFile = path.join(root, 'tsconfig.json'),
  runtimeExports: Readonly<Record<string, string>> = RUNTIME_EXPORTS,
): { findings: ExportFinding[]; stale: string[] } {
  const program = loadProgram(configFile);
  const checker = program.getTypeChecker();
  const files = program.getSourceFiles().filter((sf) => isProjectFile(root, sf));
  const used = new Set<ts.Symbol>();
  const wholeModules = new Set<ts.Symbol>();

  const moduleOf = (spec: ts.Expression | undefined): ts.Symbol | undefined =>
    spec && ts.isStringLiteralLike(spec) ? checker.getSymbolAtLocation(spec) : undefined;
  const markAlias = (id: ts.Node): void => {
    const s = checker.getSymbolAtLocation(id);
    if (s === undefined) return;
    used.add(s);
    if (s.flags & ts.SymbolFlags.Alias) used.add(checker.getAliasedSymbol(s));
  };

  for (const sf of files) {
    const visit = (node: ts.Node): void => {
      if (ts.isImportDeclaration(node)) {
        const b = node.importClause?.namedBindings;
        if (b && ts.isNamespaceImport(b)) addIf(wholeModules, moduleOf(node.moduleSpecifier));
        if (b && ts.isNamedImports(b)) for (const el of b.elements) markAlias(el.name);
        if (node.importClause?.name) markAlias(node.importClause.name);
      } else if (ts.isExportDeclaration(node) && node.moduleSpecifier) {
        const c = node.exportClause;
        if (!c || ts.isNamespaceExport(c)) addIf(wholeModules, moduleOf(node.moduleSpecifier));
        else for (const el of c.elements) markAlias(el.name);
      } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
        addIf(wholeModules, moduleOf(node.arguments[0]));
      } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
        addIf(wholeModules, moduleOf(node.argument.literal));
      }
      ts.forEachChild(node, visit);
    };
    visit(sf);
  }

  const findings: ExportFinding[] = [];
  /** Every export of the project as `file#name`: a runtime entry naming none of them is stale. */
  const exported = new Set<string>();
  for (const sf of files) {
    const mod = checker.getSymbolAtLocation(sf);
    if (mod === undefined) continue;
    const rel = path.relative(root, sf.fileName).split(path.sep).join('/');
    const exports = checker.getExportsOfModule(mod);
    for (const sym of exports) exported.add(`${rel}#${sym.name}`);
    if (wholeModules.has(mod) || /\.spec\.ts$/.test(rel) || rel === 'playwright.config.ts') continue; // wholly reached, or a test runner entry
    for (const sym of exports) {
      if (used.has(sym) || runtimeExports[`${rel}#${sym.name}`] !== undefined) continue;
      const decl = sym.declarations?.find((d) => d.getSourceFile() === sf);
      if (decl === undefined || sym.flags & ts.SymbolFlags.Alias) continue; // re-exports are judged at their source
      const local = usedInOwnFile(sf, sym, checker);
      const keyword = exportKeywordOf(decl, sf);
      findings.push({
        file: rel,
        line: sf.getLineAndCharacterOfPosition(decl.getStart(sf)).line + 1,
        name: sym.name,
        kind: local ? 'local' : 'unused',
        ...(keyword ? { exportKeyword: keyword } : {}),
      });
    }
  }
  const stale = Object.keys(runtimeExports).filter((k) => !exported.has(k));
  return { findings, stale };
}

/** The `export` modifier of a declaration that declares only this one name (not `export const a, b`). */
function exportKeywordOf(decl: ts.Declaration, sf: ts.SourceFile): { start: number; end: number } | undefined {
  let stmt: ts.Node = decl;
  if (ts.isVariableDeclaration(decl)) {
    const list = decl.parent;
    if (!ts.isVariableDeclarationList(list) || list.declarations.length !== 1) return undefined;
    stmt = list.parent;
  }
  if (!ts.canHaveModifiers(stmt)) return undefined;
  const mods = ts.getModifiers(stmt) ?? [];
  const exp = mods.find((m) => m.kind === ts.SyntaxKind.ExportKeyword);
  if (exp === undefined || mods.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword)) return undefined;
  const start = exp.getStart(sf);
  let end = exp.getEnd();
  while (sf.text[end] === ' ') end++;
  return { start, end };
}

function addIf(set: Set<ts.Symbol>, s: ts.Symbol | undefined): void {
  if (s !== undefined) set.add(s);
}

/** Does any identifier in `sf`, other than the symbol's own declaration names, refer to it? */
function usedInOwnFile(sf: ts.SourceFile, sym: ts.Symbol, checker: ts.TypeChecker): boolean {
  const names = new Set((sym.declarations ?? []).map((d) => ts.getNameOfDeclaration(d)).filter((n) => n !== undefined));
  let found = false;
  const visit = (node: ts.Node): void => {
    if (found) return;
    if (ts.isIdentifier(node) && node.text === sym.name && !names.has(node)) {
      const s = checker.getSymbolAtLocation(node);
      if (
        s === sym ||
        (s !== undefined && (s.flags & ts.SymbolFlags.Alias) === 0 && checker.getExportSymbolOfSymbol(s) === sym)
      ) {
        found = true;
        return;
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return found;
}

function isProjectFile(root: string, sf: ts.SourceFile): boolean {
  const rel = path.relative(root, sf.fileName);
  return !sf.isDeclarationFile && !rel.startsWith('..') && !rel.split(path.sep).includes('node_modules');
}

function loadProgram(configFile: string): ts.Program {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    configFile,
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(
          `exports check: cannot read ${configFile}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`,
        );
      },
    },
  );
  if (parsed === undefined) throw new Error(`exports check: cannot read ${configFile}`);
  return ts.createProgram(parsed.fileNames, parsed.options);
}

export function formatFindings(findings: readonly ExportFinding[]): string {
  return findings
    .map(
      (f) =>
        `${f.file}:${f.line}  ${f.name}  ${f.kind === 'local' ? 'exported but used only in its own file; drop `export`' : 'exported and used nowhere; delete it'}`,
    )
    .join('\n');
}
