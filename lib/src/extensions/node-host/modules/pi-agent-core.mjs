// The host's `@earendil-works/pi-agent-core` (and the legacy name): the agent loop is the
// toolkit's own (Rust), so an extension cannot start an `Agent` inside the Node host; the names
// exist so that importing them works, and using them throws `pi-toolkit host: … is not available`.
import { unavailableClass, unavailableFn } from "./inert.mjs";

const M = "@earendil-works/pi-agent-core";
export const Agent = unavailableClass(M, "Agent");
export const agentLoop = unavailableFn(M, "agentLoop");
export const agentLoopContinue = unavailableFn(M, "agentLoopContinue");
export default { Agent, agentLoop, agentLoopContinue };
