// Module resolve/load hooks of the Node host: what jiti gives pi's extensions, on plain Node.
//  * TypeScript without a build step: `.ts`/`.mts`/`.cts` (also inside node_modules, which
//    Node's own type stripping refuses) are stripped with `module.stripTypeScriptTypes`
//    (transform mode, so enums and parameter properties work); CommonJS names (`require`,
//    `__dirname`, `__filename`) are provided to TypeScript modules that use them undeclared.
//  * jiti's lenient specifiers: extensionless relative imports (`./util` → `./util.ts`, `.js`,
//    `/index.ts`…), `.js` specifiers that name a `.ts` file, JSON imports without attributes.
//  * pi's own packages (`@earendil-works/pi-*`, legacy `@mariozechner/pi-*`, `typebox`,
//    `@sinclair/typebox`, any subpath) resolve to the host's modules in ./modules/. A named
//    import the host module lacks is found by scanning the importer's source and is supplied as
//    an inert stand-in (a class that constructs, a function that throws
//    `pi-toolkit host: <name> is not available` when called), so an extension that merely
//    imports a TUI helper still loads.
// Works as in-thread hooks (`module.registerHooks`, Node >= 22.15) or, on older Node, as
// `module.register` hooks in the loader thread (there `.ts` is refused with one clear error).
import { dirname, extname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import * as nodeModule from "node:module";
import { strip } from "./strip.mjs";

const { readFileSync, statSync } = nodeModule.createRequire(import.meta.url)("node:fs"); // no ESM facade (start-up)

const HERE = dirname(fileURLToPath(import.meta.url));
const MODULES = `${HERE}/modules`;
const MODULES_URL = pathToFileURL(MODULES).href;

/** Host module id for a bare specifier, or null when it is not one of pi's packages. */
export function hostModuleId(spec) {
	let m = /^@(?:earendil-works|mariozechner)\/(pi-coding-agent|pi-ai|pi-tui|pi-agent-core)(\/.*)?$/.exec(spec);
	if (m) return m[1];
	m = /^(?:typebox|@sinclair\/typebox)(\/.*)?$/.exec(spec);
	if (m) return "typebox";
	return null;
}

// Export names of the host modules, filled by configure() (the host imports them first).
let exportNames = new Map(); // id -> Set(names)
// Names each importer wants from each host module: url -> Map(id -> Set(names)).
const wanted = new Map();
let tsSupported = typeof nodeModule.stripTypeScriptTypes === "function";
// pi APIs that are synchronous in pi but need the toolkit's state: when any loaded source names
// one, the host fetches it before each handler runs (host.mjs `prefetch`).
const USE_TOKENS = ["sessionManager", "getSessionName", "getActiveTools", "getAllTools", "getCommands", "getContextUsage", "getSystemPrompt", "hasPendingMessages", "modelRegistry"];
export const uses = new Set();
function scanUses(source) {
	for (const t of USE_TOKENS) if (!uses.has(t) && source.includes(t)) uses.add(t);
}

export function configure(data) {
	exportNames = new Map(Object.entries(data.exportNames).map(([k, v]) => [k, new Set(v)]));
	if (data.tsSupported === false) tsSupported = false;
}

const IMPORT_RE = /(?:^|[^.\w$])(import|export)\s*(?:type\s+)?((?:[\w$]+\s*,\s*)?(?:\{[^}]*\})?|[\w$]+|\*\s*as\s+[\w$]+|\*)\s*from\s*["']([^"']+)["']/g;

function scanImports(url, source) {
	if (!url.startsWith(MODULES_URL)) scanUses(source);
	if (!/pi-|typebox/.test(source)) return;
	let per;
	for (const m of source.matchAll(IMPORT_RE)) {
		const id = hostModuleId(m[3]);
		if (!id) continue;
		const names = new Set();
		const clause = m[2].trim();
		const def = /^([\w$]+)\s*(,|$)/.exec(clause);
		if (def && m[1] === "import") names.add("default");
		const braces = /\{([^}]*)\}/.exec(clause);
		if (braces) {
			for (let part of braces[1].split(",")) {
				part = part.trim();
				if (!part || /^type\s/.test(part)) continue;
				const name = part.split(/\s+as\s+/)[0].trim();
				if (/^[\w$]+$/.test(name)) names.add(name);
			}
		}
		if (!names.size) continue;
		per ??= new Map();
		const set = per.get(id) ?? new Set();
		for (const n of names) set.add(n);
		per.set(id, set);
	}
	if (per) wanted.set(url, per);
}

function hostUrl(id, parentURL) {
	const base = pathToFileURL(`${MODULES}/${id}.mjs`).href;
	const want = parentURL ? wanted.get(parentURL)?.get(id) : undefined;
	const have = exportNames.get(id) ?? new Set();
	const missing = want ? [...want].filter((n) => !have.has(n)).sort() : [];
	return missing.length ? `${base}?missing=${missing.join(",")}` : base;
}

function wrapperSource(url) {
	const u = new URL(url);
	const base = `${u.origin === "null" ? "file://" : u.origin}${u.pathname}`;
	const id = u.pathname.replace(/^.*\//, "").replace(/\.mjs$/, "");
	const missing = (u.searchParams.get("missing") ?? "").split(",").filter((n) => /^[\w$]+$/.test(n));
	const lines = [
		`export * from ${JSON.stringify(base)};`,
		`import * as __host from ${JSON.stringify(base)};`,
		`import { missingExport as __missing } from ${JSON.stringify(pathToFileURL(`${MODULES}/inert.mjs`).href)};`,
	];
	if (exportNames.get(id)?.has("default")) lines.push(`export { default } from ${JSON.stringify(base)};`);
	for (const n of missing) {
		if (n === "default") lines.push(`export default __host;`);
		else lines.push(`export const ${n} = __missing(${JSON.stringify(`${id}`)}, ${JSON.stringify(n)});`);
	}
	return lines.join("\n");
}

const TS_EXT = new Set([".ts", ".mts", ".cts", ".tsx"]);
const CANDIDATE_SUFFIXES = [".ts", ".tsx", ".mts", ".js", ".mjs", ".cjs", ".json", "/index.ts", "/index.tsx", "/index.mts", "/index.js", "/index.mjs", "/index.cjs"];

function isFile(p) {
	try {
		return statSync(p).isFile();
	} catch {
		return false;
	}
}

/** jiti's lenient lookups for a relative or absolute specifier that Node did not find. */
function lenientFile(spec, parentURL) {
	if (!(spec.startsWith("./") || spec.startsWith("../") || spec.startsWith("/") || spec.startsWith("file:"))) return null;
	let target;
	try {
		target = spec.startsWith("file:") ? fileURLToPath(spec) : spec.startsWith("/") ? spec : fileURLToPath(new URL(spec, parentURL));
	} catch {
		return null;
	}
	const ext = extname(target);
	if (ext === ".js" || ext === ".mjs" || ext === ".cjs") {
		const stem = target.slice(0, -ext.length);
		for (const e of [".ts", ".tsx", ".mts", ".cts"]) if (isFile(stem + e)) return stem + e;
	}
	for (const s of CANDIDATE_SUFFIXES) if (isFile(target + s)) return target + s;
	return null;
}

function resolveCore(spec, context, next) {
	const id = hostModuleId(spec);
	if (id) return { url: hostUrl(id, context.parentURL), shortCircuit: true, format: "module" };
	return null;
}

function notFound(e) {
	return e && (e.code === "ERR_MODULE_NOT_FOUND" || e.code === "ERR_UNSUPPORTED_DIR_IMPORT" || e.code === "MODULE_NOT_FOUND");
}

export function resolveSync(spec, context, nextResolve) {
	const host = resolveCore(spec, context);
	if (host) return host;
	try {
		return nextResolve(spec, context);
	} catch (e) {
		if (!notFound(e)) throw e;
		const file = lenientFile(spec, context.parentURL);
		if (file) return { url: pathToFileURL(file).href, shortCircuit: true };
		throw e;
	}
}

export async function resolve(spec, context, nextResolve) {
	const host = resolveCore(spec, context);
	if (host) return host;
	try {
		return await nextResolve(spec, context);
	} catch (e) {
		if (!notFound(e)) throw e;
		const file = lenientFile(spec, context.parentURL);
		if (file) return { url: pathToFileURL(file).href, shortCircuit: true };
		throw e;
	}
}

// Prepended on the module's first line (positions stay), without top-level await so the module
// can still be require()d.
function tsPrelude(source) {
	const uses = (n) => new RegExp(`(^|[^\\w$.])${n}\\b`).test(source) && !new RegExp(`(const|let|var|function|import)\\s+[^;=]*\\b${n}\\b`).test(source);
	const parts = [];
	if (uses("require")) parts.push(`import { createRequire as __piToolkitCreateRequire } from "node:module"; const require = __piToolkitCreateRequire(import.meta.url);`);
	if (uses("__filename")) parts.push(`const __filename = import.meta.filename;`);
	if (uses("__dirname")) parts.push(`const __dirname = import.meta.dirname;`);
	return parts.join(" ");
}

function looksCommonJs(source) {
	return !/(^|\n)\s*(import|export)\b/.test(source) && /\b(module\.exports|exports\.|require\()/.test(source);
}

function loadCore(url, context) {
	if (url.startsWith("file:") && url.includes("?missing=")) return { format: "module", source: wrapperSource(url), shortCircuit: true };
	if (!url.startsWith("file:")) return null;
	const path = fileURLToPath(url);
	const ext = extname(path);
	if (TS_EXT.has(ext)) {
		if (!tsSupported) {
			throw new Error(`TypeScript extensions need Node >= 22.18 with module.stripTypeScriptTypes (this is Node ${process.version}); set PI_NODE to a newer node`);
		}
		const raw = readFileSync(path, "utf8");
		let js;
		try {
			js = strip(raw, url);
		} catch (e) {
			const msg = e && e.message ? e.message : String(e);
			throw new Error(`${msg.split("\n")[0]} (${path})`);
		}
		const cjs = ext === ".cts" || (ext !== ".mts" && looksCommonJs(js));
		if (cjs) {
			scanUses(js);
			return { format: "commonjs", source: js, shortCircuit: true };
		}
		const prelude = tsPrelude(js);
		if (prelude) js = `${prelude}${js}`;
		scanImports(url, js);
		return { format: "module", source: js, shortCircuit: true };
	}
	const imported = Array.isArray(context.conditions) && context.conditions.includes("import") && !context.conditions.includes("require");
	if (ext === ".json" && imported && !(context.importAttributes && context.importAttributes.type === "json")) {
		return { format: "module", source: `export default ${readFileSync(path, "utf8")};`, shortCircuit: true };
	}
	return null;
}

function sourceText(src) {
	if (src == null) return "";
	return typeof src === "string" ? src : Buffer.from(src).toString("utf8");
}

export function loadSync(url, context, nextLoad) {
	const own = loadCore(url, context);
	if (own) return own;
	const r = nextLoad(url, context);
	if (r.format === "module" && r.source != null) scanImports(url, sourceText(r.source));
	else if (r.source != null && url.startsWith("file:") && !url.includes("/node_modules/")) scanUses(sourceText(r.source));
	return r;
}

export async function load(url, context, nextLoad) {
	const own = loadCore(url, context);
	if (own) return own;
	const r = await nextLoad(url, context);
	if (r.format === "module" && r.source != null) scanImports(url, sourceText(r.source));
	return r;
}

// module.register() entry point (loader thread).
export async function initialize(data) {
	configure(data);
}
