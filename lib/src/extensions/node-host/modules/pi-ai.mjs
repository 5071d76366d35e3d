// The host's `@earendil-works/pi-ai` (and `@mariozechner/pi-ai`, every subpath such as
// `/compat`): the pieces extensions use while loading — `Type` (the host's typebox),
// `StringEnum`, `uuidv7`, thinking-level helpers. Talking to a model from inside an extension
// (`complete`, `stream`, provider registration) is not available in the toolkit's host and throws
// `pi-toolkit host: <name> is not available` when called.
import { createRequire } from "node:module";
import { Type } from "./typebox.mjs";
import { inertClass, unavailableFn } from "./inert.mjs";

export { Type };

/** A string enum schema the way pi writes it: `{type:"string", enum, ...options}`. */
export function StringEnum(values, options) {
	return { type: "string", enum: [...values], ...(options ?? {}) };
}

/** An RFC 9562 version-7 UUID (time-ordered). */
export function uuidv7() {
	const b = createRequire(import.meta.url)("node:crypto").randomBytes(16); // loaded on first use: node:crypto is 17 internal modules
	const ms = BigInt(Date.now());
	for (let i = 0; i < 6; i++) b[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
	b[6] = (b[6] & 0x0f) | 0x70;
	b[8] = (b[8] & 0x3f) | 0x80;
	const h = b.toString("hex");
	return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export const THINKING_LEVELS = ["off", "minimal", "low", "medium", "high", "xhigh"];

/** The level, clamped to what the model supports (`off` for a model that does not reason). */
export function clampThinkingLevel(model, level) {
	if (!model || !model.reasoning) return "off";
	if (level === "xhigh" && !(model.thinkingLevels ?? []).includes("xhigh")) return "high";
	return THINKING_LEVELS.includes(level) ? level : "medium";
}
export function supportsXhigh(model) {
	return !!(model && (model.thinkingLevels ?? []).includes("xhigh"));
}

/** pi's cost arithmetic: per-million-token prices times the usage. */
export function calculateCost(model, usage) {
	const c = model?.cost ?? {};
	const cost = {
		input: ((c.input ?? 0) * (usage?.input ?? 0)) / 1e6,
		output: ((c.output ?? 0) * (usage?.output ?? 0)) / 1e6,
		cacheRead: ((c.cacheRead ?? 0) * (usage?.cacheRead ?? 0)) / 1e6,
		cacheWrite: ((c.cacheWrite ?? 0) * (usage?.cacheWrite ?? 0)) / 1e6,
	};
	cost.total = cost.input + cost.output + cost.cacheRead + cost.cacheWrite;
	if (usage) usage.cost = cost;
	return cost;
}

const M = "@earendil-works/pi-ai";
export const complete = unavailableFn(M, "complete");
export const completeSimple = unavailableFn(M, "completeSimple");
export const stream = unavailableFn(M, "stream");
export const streamSimple = unavailableFn(M, "streamSimple");
export const getModel = unavailableFn(M, "getModel");
export const getModels = unavailableFn(M, "getModels");
export const getProviders = unavailableFn(M, "getProviders");
export const getEnvApiKey = unavailableFn(M, "getEnvApiKey");
export const registerApiProvider = unavailableFn(M, "registerApiProvider");
export const anthropicMessagesApi = unavailableFn(M, "anthropicMessagesApi");
export const openAIResponsesApi = unavailableFn(M, "openAIResponsesApi");
export const createAssistantMessageEventStream = unavailableFn(M, "createAssistantMessageEventStream");
export const AssistantMessageEventStream = inertClass("AssistantMessageEventStream");

export default { Type, StringEnum, uuidv7, clampThinkingLevel, calculateCost, THINKING_LEVELS };
