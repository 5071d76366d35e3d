// Stand-ins for what the Node host cannot give: TUI components that construct and do nothing,
// and functions that throw `pi-toolkit host: <name> is not available` when called, so an
// extension that only imports them still loads and one that really needs them fails with a
// diagnostic that names the missing API.

const SKIP = new Set(["then", "catch", "finally", "toJSON", "constructor", "asymmetricMatch", "$$typeof", "nodeType"]);
const noop = () => undefined;

/** The error every unavailable API throws. */
export function unavailable(name) {
	return new Error(`pi-toolkit host: ${name} is not available`);
}

/** An object whose every method is a no-op (a theme, a TUI handle). */
export function inertObject(extra = {}) {
	return new Proxy(extra, {
		get(target, prop) {
			if (prop in target) return target[prop];
			if (typeof prop === "symbol" || SKIP.has(prop)) return undefined;
			return inertFn;
		},
	});
}
// A theme's `fg(color, text)` / `bold(text)` give the text back; anything else gives nothing.
function inertFn(...args) {
	for (let i = args.length - 1; i >= 0; i--) if (typeof args[i] === "string") return args[i];
	return undefined;
}

/** A component class: constructs, every method is a no-op, `render()` draws nothing. */
export function inertClass(name) {
	const C = {
		[name]: class {
			constructor(...args) {
				this.__args = args;
			}
			render() {
				return [];
			}
			invalidate() {}
			handleInput() {}
			dispose() {}
		},
	}[name];
	const proto = C.prototype;
	Object.setPrototypeOf(
		proto,
		new Proxy(Object.create(null), {
			get(_t, prop) {
				if (typeof prop === "symbol" || SKIP.has(prop)) return undefined;
				return noop;
			},
		}),
	);
	return C;
}

/** A class that cannot be used here: constructing it or calling a static method throws. */
export function unavailableClass(module, name) {
	const C = {
		[name]: class {
			constructor() {
				throw unavailable(`${name} (${module})`);
			}
		},
	}[name];
	return new Proxy(C, {
		get(target, prop) {
			if (prop in target || typeof prop === "symbol" || SKIP.has(prop)) return target[prop];
			return () => {
				throw unavailable(`${name}.${String(prop)} (${module})`);
			};
		},
	});
}

/** A function that cannot be used here. */
export function unavailableFn(module, name) {
	return {
		[name]() {
			throw unavailable(`${name} (${module})`);
		},
	}[name];
}

/** The stand-in for a name an extension imports that the host module does not export. */
export function missingExport(module, name) {
	if (/^[A-Z][A-Z0-9_]*$/.test(name)) return inertObject();
	if (/^[A-Z]/.test(name)) return inertClass(name);
	return unavailableFn(`@earendil-works/${module}`, name);
}
