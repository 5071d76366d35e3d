// The host's `@earendil-works/pi-tui` (and the legacy name): the toolkit has no TUI, so the
// components are inert classes (they construct; `render()` draws nothing) and the text helpers
// do plain, ANSI-aware string work, which is all an extension can observe outside a terminal.
import { inertClass, inertObject } from "./inert.mjs";

const ANSI = /\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[PX^_][^\x1b]*\x1b\\/g;
const stripAnsi = (s) => String(s ?? "").replace(ANSI, "");

function charWidth(cp) {
	if (cp === 0 || cp < 32 || (cp >= 0x7f && cp < 0xa0)) return 0;
	if ((cp >= 0x300 && cp <= 0x36f) || (cp >= 0x200b && cp <= 0x200f) || (cp >= 0xfe00 && cp <= 0xfe0f)) return 0;
	if (
		(cp >= 0x1100 && cp <= 0x115f) || (cp >= 0x2e80 && cp <= 0xa4cf) || (cp >= 0xac00 && cp <= 0xd7a3) ||
		(cp >= 0xf900 && cp <= 0xfaff) || (cp >= 0xfe30 && cp <= 0xfe4f) || (cp >= 0xff00 && cp <= 0xff60) ||
		(cp >= 0xffe0 && cp <= 0xffe6) || (cp >= 0x1f300 && cp <= 0x1faff) || (cp >= 0x20000 && cp <= 0x3fffd)
	)
		return 2;
	return 1;
}

/** Columns `text` takes on a terminal (ANSI escapes take none, wide characters two). */
export function visibleWidth(text) {
	let w = 0;
	for (const ch of stripAnsi(text)) w += charWidth(ch.codePointAt(0));
	return w;
}

/** `text` cut to `width` columns, `ellipsis` (default `...`) at the end when cut. */
export function truncateToWidth(text, width, ellipsis = "...", pad = false) {
	const plain = stripAnsi(text);
	if (visibleWidth(plain) <= width) return pad ? plain + " ".repeat(width - visibleWidth(plain)) : String(text ?? "");
	const room = Math.max(0, width - visibleWidth(ellipsis));
	let out = "";
	let w = 0;
	for (const ch of plain) {
		const cw = charWidth(ch.codePointAt(0));
		if (w + cw > room) break;
		out += ch;
		w += cw;
	}
	return out + ellipsis;
}

/** Word-wraps `text` to lines of at most `width` columns. */
export function wrapTextWithAnsi(text, width) {
	const out = [];
	for (const para of String(text ?? "").split("\n")) {
		let line = "";
		for (const word of para.split(" ")) {
			const cand = line ? `${line} ${word}` : word;
			if (visibleWidth(cand) > width && line) {
				out.push(line);
				line = word;
			} else line = cand;
		}
		out.push(line);
	}
	return out;
}

/** Items whose text contains the query's characters in order (case-insensitive). */
export function fuzzyFilter(items, query, getText = (x) => String(x)) {
	const q = String(query ?? "").toLowerCase();
	if (!q) return [...items];
	return items.filter((it) => {
		const t = getText(it).toLowerCase();
		let i = 0;
		for (const ch of t) if (ch === q[i]) i++;
		return i >= q.length;
	});
}
export function fuzzyMatch(query, text) {
	return fuzzyFilter([text], query).length === 1;
}

// Keys: no terminal input ever arrives in the toolkit, so nothing matches.
export const Key = new Proxy({}, { get: (_t, p) => (typeof p === "string" ? (...a) => (a.length ? `${p}+${a.join("+")}` : p) : undefined) });
export const matchesKey = () => false;
export const isKeyRelease = () => false;
export const isKeyRepeat = () => false;
export const parseKey = () => undefined;
export const CURSOR_MARKER = "\x1b_pi:c\x07";
export const renderFakeCursor = (s) => s;

export const Box = inertClass("Box");
export const Container = inertClass("Container");
export const Editor = inertClass("Editor");
export const Input = inertClass("Input");
export const Loader = inertClass("Loader");
export const CancellableLoader = inertClass("CancellableLoader");
export const Markdown = inertClass("Markdown");
export const SelectList = inertClass("SelectList");
export const SettingsList = inertClass("SettingsList");
export const Spacer = inertClass("Spacer");
export const Text = inertClass("Text");
export const TruncatedText = inertClass("TruncatedText");
export const Image = inertClass("Image");
export const TUI = inertClass("TUI");
export const ProcessTerminal = inertClass("ProcessTerminal");
export const getEditorKeybindings = () => inertObject();

export default { visibleWidth, truncateToWidth, wrapTextWithAnsi, fuzzyFilter, Key, matchesKey };
