#!/usr/bin/env node
// What pi 1.6.0 loads for a directory, through its public SDK (DefaultResourceLoader).
// Run with Node 22, with HOME / PI_CODING_AGENT_DIR / PI_OFFLINE=1 set by the caller.
//
//   $NODE22 sdk-resources.mjs --cwd DIR --agent-dir DIR [--trusted|--untrusted]
//       [--no-skills] [--no-prompt-templates] [--no-themes] [--no-extensions] [--no-context-files]
//       [--skill P]... [--prompt-template P]... [--theme P]... [-e P]... [--time]
//
// --time prints `reload_ms=N` (the in-process reload() only) on stderr, for bench/resources.sh.
//
// Prints one JSON object: skills, prompts, themes, extensions (path, errors), agentsFiles (paths;
// agentsFileContents: their contents as pi loaded them),
// systemPrompt/appendSystemPrompt sources, and every diagnostic — paths as pi reports them.
// Built-in extensions (`builtin:*`) are left out of the extension list.
import { loadSdk } from "../sdk.mjs";

const argv = process.argv.slice(2);
const o = { skills: [], prompts: [], themes: [], exts: [] };
let cwd, agentDir, trusted = true;
const flags = new Set();
for (let i = 0; i < argv.length; i++) {
	const a = argv[i];
	if (a === "--cwd") cwd = argv[++i];
	else if (a === "--agent-dir") agentDir = argv[++i];
	else if (a === "--trusted") trusted = true;
	else if (a === "--untrusted") trusted = false;
	else if (a === "--skill") o.skills.push(argv[++i]);
	else if (a === "--prompt-template") o.prompts.push(argv[++i]);
	else if (a === "--theme") o.themes.push(argv[++i]);
	else if (a === "-e") o.exts.push(argv[++i]);
	else if (a === "--time") flags.add(a);
	else if (a.startsWith("--no-")) flags.add(a);
	else {
		console.error(`unknown argument ${a}`);
		process.exit(2);
	}
}
const { DefaultResourceLoader, SettingsManager } = await loadSdk();
const settingsManager = SettingsManager.create(cwd, agentDir, { projectTrusted: trusted });
const loader = new DefaultResourceLoader({
	cwd,
	agentDir,
	settingsManager,
	additionalSkillPaths: o.skills,
	additionalPromptTemplatePaths: o.prompts,
	additionalThemePaths: o.themes,
	additionalExtensionPaths: o.exts,
	noSkills: flags.has("--no-skills"),
	noPromptTemplates: flags.has("--no-prompt-templates"),
	noThemes: flags.has("--no-themes"),
	noExtensions: flags.has("--no-extensions"),
	noContextFiles: flags.has("--no-context-files"),
	packageCommandOutput: "ignore",
});
const t0 = performance.now();
await loader.reload();
if (flags.has("--time")) console.error(`reload_ms=${(performance.now() - t0).toFixed(2)}`);
const src = (s) => s && { source: s.source, scope: s.scope, origin: s.origin, baseDir: s.baseDir };
const skills = loader.getSkills();
const prompts = loader.getPrompts();
const themes = loader.getThemes();
const ext = loader.getExtensions();
const out = {
	skills: skills.skills.map((s) => ({
		name: s.name,
		description: s.description,
		path: s.filePath,
		baseDir: s.baseDir,
		disableModelInvocation: s.disableModelInvocation,
		sourceInfo: src(s.sourceInfo),
	})),
	skillDiagnostics: skills.diagnostics,
	prompts: prompts.prompts.map((p) => ({
		name: p.name,
		description: p.description,
		argumentHint: p.argumentHint,
		path: p.filePath,
		content: p.content,
		sourceInfo: src(p.sourceInfo),
	})),
	promptDiagnostics: prompts.diagnostics,
	themes: themes.themes.map((t) => ({ name: t.name, path: t.sourcePath, sourceInfo: src(t.sourceInfo) })),
	themeDiagnostics: themes.diagnostics,
	extensions: ext.extensions
		.filter((e) => !String(e.path).startsWith("builtin:"))
		.map((e) => ({ path: e.path, resolvedPath: e.resolvedPath, sourceInfo: src(e.sourceInfo) })),
	extensionErrors: ext.errors,
	extensionWarnings: ext.warnings ?? [],
	agentsFiles: loader.getAgentsFiles().agentsFiles.map((f) => f.path),
	agentsFileContents: loader.getAgentsFiles().agentsFiles.map((f) => f.content),
	systemPrompt: loader.getSystemPromptSource()?.path ?? null,
	appendSystemPrompt: loader.getAppendSystemPromptSources().map((s) => s.path),
};
process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
