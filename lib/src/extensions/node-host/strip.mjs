// TypeScript stripping for the host's load hook, with its on-disk cache. Node's
// `module.stripTypeScriptTypes` (transform mode, so enums and parameter properties work; positions
// are kept) costs ~100 ms of CPU on its first call in a process (Node loads and compiles its
// swc/wasm stripper), so its output is kept in `$PI_TS_CACHE` (default
// `${XDG_CACHE_HOME:-~/.cache}/pi-toolkit/ts-cache/`) and a run whose extensions did not change
// never calls it. An entry is named by a cheap 64-bit hash of Node's version, the module URL and
// the source, and holds the source itself: a hit is only taken when the stored source equals the
// file's, so a hash collision costs a strip, never wrong code. Hashing in JS keeps `node:crypto`
// (17 internal modules) out of the start-up. A cache that cannot be read or written is no error:
// the source is stripped again.
import { join } from "node:path";
import * as nodeModule from "node:module";

// Through require: an ESM import of node:fs builds its facade (fs/promises, streams, watchers).
const { mkdirSync, readFileSync, renameSync, writeFileSync } = nodeModule.createRequire(import.meta.url)("node:fs");

const home = () => process.env.HOME || nodeModule.createRequire(import.meta.url)("node:os").homedir();
export const TS_CACHE = process.env.PI_TS_CACHE ?? join(process.env.XDG_CACHE_HOME || join(home(), ".cache"), "pi-toolkit", "ts-cache");

/** FNV-1a 32-bit and a second, differently seeded and mixed 32-bit hash over the UTF-16 code units: 16 hex digits. */
export function hash64(text) {
	let a = 0x811c9dc5;
	let b = 0x01000193 ^ 0x5bd1e995;
	for (let i = 0; i < text.length; i++) {
		const c = text.charCodeAt(i);
		a = Math.imul(a ^ c, 0x01000193);
		b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15);
	}
	return (a >>> 0).toString(16).padStart(8, "0") + (b >>> 0).toString(16).padStart(8, "0");
}

function entryName(raw, url) {
	return join(TS_CACHE, `${hash64(`${process.version}\0transform\0${url}\0${raw}`)}.v2.js`);
}

// An entry: the source's length in UTF-16 units, a newline, the source, the stripped JavaScript.
function readCached(raw, url) {
	let text;
	try {
		text = readFileSync(entryName(raw, url), "utf8");
	} catch {
		return undefined;
	}
	const nl = text.indexOf("\n");
	const n = Number(text.slice(0, nl));
	if (nl < 1 || !Number.isInteger(n) || text.slice(nl + 1, nl + 1 + n) !== raw) return undefined;
	return text.slice(nl + 1 + n);
}

function writeCached(raw, url, js) {
	try {
		const file = entryName(raw, url);
		mkdirSync(TS_CACHE, { recursive: true });
		const tmp = `${file}.${process.pid}.tmp`;
		writeFileSync(tmp, `${raw.length}\n${raw}${js}`);
		renameSync(tmp, file);
	} catch {}
}

/** Stripped JavaScript for `raw` (the source at `url`): from the cache, else stripped and cached. */
export function strip(raw, url) {
	const hit = readCached(raw, url);
	if (hit !== undefined) return hit;
	const js = nodeModule.stripTypeScriptTypes(raw, { mode: "transform", sourceUrl: url });
	writeCached(raw, url, js);
	return js;
}
