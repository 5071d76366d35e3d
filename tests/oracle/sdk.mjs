// Shared loader for pi 1.6.0's public SDK (used by sdk-*.mjs). Run with Node 22.
// Resolves @earendil-works/pi-coding-agent from $PI160_SDK, else
// ${PI_ORACLE_DIR:-$HOME/.cache/pi-toolkit-oracle}/v160/node_modules.
import { existsSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

export function sdkDir() {
	if (process.env.PI160_SDK) return process.env.PI160_SDK;
	const root = process.env.PI_ORACLE_DIR || join(homedir(), ".cache", "pi-toolkit-oracle");
	return join(root, "v160", "node_modules", "@earendil-works", "pi-coding-agent");
}

export async function loadSdk() {
	const major = Number(process.versions.node.split(".")[0]);
	if (major < 22) {
		console.error(`pi 1.6.0 SDK needs Node >= 22 (this is ${process.version}); use $NODE22 from tests/oracle/env.sh`);
		process.exit(2);
	}
	const entry = join(sdkDir(), "dist", "index.js");
	if (!existsSync(entry)) {
		console.error(`pi 1.6.0 SDK not found at ${entry}; run tests/oracle/install.sh`);
		process.exit(2);
	}
	return import(pathToFileURL(entry).href);
}

/** JSON.stringify replacer: Dates -> ISO strings (invalid Date -> null). */
export function dateReplacer(key, value) {
	const raw = this[key];
	if (raw instanceof Date) return Number.isNaN(raw.getTime()) ? null : raw.toISOString();
	return value;
}
