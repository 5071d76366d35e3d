// The host's own `typebox` (and `@sinclair/typebox`): schema builders that return plain JSON
// Schema objects, key order as typebox 1.x writes them (the kind keys first, then the caller's
// options), so a tool's `parameters` serialize the way pi 1.6.0 sends them. Optional and
// readonly markers are non-enumerable, so JSON.stringify never shows them. `Value` / `Compile`
// are a small validator over the same JSON Schema subset. Our own implementation of typebox's
// documented behaviour.

const OPTIONAL = "~optional";
const READONLY = "~readonly";
const KIND = "~kind";

function mark(schema, key, value = true) {
	Object.defineProperty(schema, key, { value, enumerable: false, configurable: true, writable: true });
	return schema;
}
function withKind(kind, keys, options) {
	const out = { ...keys, ...(options ?? {}) };
	return mark(out, KIND, kind);
}
function clone(schema) {
	if (Array.isArray(schema)) return schema.map(clone);
	if (schema === null || typeof schema !== "object") return schema;
	const out = {};
	for (const k of Object.keys(schema)) out[k] = clone(schema[k]);
	for (const k of [OPTIONAL, READONLY, KIND]) if (schema[k] !== undefined) mark(out, k, schema[k]);
	return out;
}
const isOptional = (s) => !!(s && s[OPTIONAL]);

function ObjectSchema(properties = {}, options) {
	const required = Object.keys(properties).filter((k) => !isOptional(properties[k]));
	const keys = { type: "object" };
	if (required.length) keys.required = required;
	keys.properties = properties;
	return withKind("Object", keys, options);
}
function TupleSchema(items, options) {
	const keys = { type: "array", additionalItems: false, items };
	keys.minItems = items.length;
	return withKind("Tuple", keys, options);
}
function literalType(v) {
	return typeof v === "number" ? "number" : typeof v === "boolean" ? "boolean" : "string";
}
function EnumSchema(values, options) {
	const list = Array.isArray(values)
		? values
		: Object.keys(values)
				.filter((k) => !/^\d+$/.test(k))
				.map((k) => values[k]);
	return withKind("Enum", { enum: list }, options);
}
function propsOf(schema) {
	if (schema && schema.properties) return schema.properties;
	if (schema && Array.isArray(schema.allOf)) return Object.assign({}, ...schema.allOf.map(propsOf));
	return {};
}
function keyList(keys) {
	if (Array.isArray(keys)) return keys;
	if (keys && Array.isArray(keys.anyOf)) return keys.anyOf.map((s) => s.const);
	if (keys && keys.const !== undefined) return [keys.const];
	if (keys && Array.isArray(keys.enum)) return keys.enum;
	return [];
}
function mapProps(schema, fn, options) {
	const out = {};
	for (const [k, v] of Object.entries(propsOf(schema))) out[k] = fn(clone(v));
	const extra = {};
	for (const k of Object.keys(schema ?? {})) if (!["type", "required", "properties", "allOf"].includes(k)) extra[k] = schema[k];
	return ObjectSchema(out, { ...extra, ...(options ?? {}) });
}

export const Type = {
	String: (options) => withKind("String", { type: "string" }, options),
	Number: (options) => withKind("Number", { type: "number" }, options),
	Integer: (options) => withKind("Integer", { type: "integer" }, options),
	Boolean: (options) => withKind("Boolean", { type: "boolean" }, options),
	Null: (options) => withKind("Null", { type: "null" }, options),
	Undefined: (options) => withKind("Undefined", { type: "undefined" }, options),
	Void: (options) => withKind("Void", { type: "void" }, options),
	BigInt: (options) => withKind("BigInt", { type: "bigint" }, options),
	Symbol: (options) => withKind("Symbol", { type: "symbol" }, options),
	Any: (options) => withKind("Any", {}, options),
	Unknown: (options) => withKind("Unknown", {}, options),
	Never: (options) => withKind("Never", { not: {} }, options),
	Literal: (value, options) => withKind("Literal", { type: literalType(value), const: value }, options),
	Array: (items, options) => withKind("Array", { type: "array", items }, options),
	Object: ObjectSchema,
	Tuple: TupleSchema,
	Union: (anyOf, options) => withKind("Union", { anyOf }, options),
	Intersect: (allOf, options) => withKind("Intersect", { allOf }, options),
	Enum: EnumSchema,
	Record: (key, value, options) => {
		const pattern = key && typeof key.pattern === "string" ? key.pattern : key && key.type === "number" ? "^-?\\d+(\\.\\d+)?$" : "^.*$";
		return withKind("Record", { type: "object", patternProperties: { [pattern]: value } }, options);
	},
	Unsafe: (schema = {}) => withKind("Unsafe", { ...schema }),
	Ref: (ref, options) => withKind("Ref", { $ref: typeof ref === "string" ? ref : ref?.$id }, options),
	Optional: (schema, flag = true) => mark(clone(schema), OPTIONAL, flag !== false),
	Readonly: (schema, flag = true) => mark(clone(schema), READONLY, flag !== false),
	ReadonlyOptional: (schema) => mark(mark(clone(schema), READONLY), OPTIONAL),
	Partial: (schema, options) => mapProps(schema, (s) => mark(s, OPTIONAL), options),
	Required: (schema, options) => mapProps(schema, (s) => mark(s, OPTIONAL, false), options),
	Pick: (schema, keys, options) => {
		const want = keyList(keys);
		const props = propsOf(schema);
		const out = {};
		for (const k of want) if (k in props) out[k] = clone(props[k]);
		return ObjectSchema(out, options);
	},
	Omit: (schema, keys, options) => {
		const drop = new Set(keyList(keys));
		const out = {};
		for (const [k, v] of Object.entries(propsOf(schema))) if (!drop.has(k)) out[k] = clone(v);
		return ObjectSchema(out, options);
	},
	Composite: (schemas, options) => ObjectSchema(Object.assign({}, ...schemas.map((s) => propsOf(s))), options),
	KeyOf: (schema, options) =>
		withKind("Union", { anyOf: Object.keys(propsOf(schema)).map((k) => Type.Literal(k)) }, options),
	Date: (options) => withKind("Date", { type: "Date" }, options),
	RegExp: (pattern, options) => withKind("String", { type: "string", pattern: String(pattern?.source ?? pattern) }, options),
	Function: (parameters, returns, options) => withKind("Function", { type: "function", parameters, returns }, options),
	Promise: (item, options) => withKind("Promise", { type: "promise", item }, options),
	Recursive: (fn, options) => fn(Type.Unknown(options)),
	TemplateLiteral: (_parts, options) => withKind("TemplateLiteral", { type: "string" }, options),
	Strict: (schema) => JSON.parse(JSON.stringify(schema)),
};
Type.Uint8Array = (options) => withKind("Uint8Array", { type: "Uint8Array" }, options);

// --- a small validator (Value.Check / Value.Errors / Compile) over the JSON Schema produced above
function typeOk(type, v) {
	switch (type) {
		case "string": return typeof v === "string";
		case "number": return typeof v === "number" && Number.isFinite(v);
		case "integer": return Number.isInteger(v);
		case "boolean": return typeof v === "boolean";
		case "null": return v === null;
		case "undefined": case "void": return v === undefined;
		case "array": return Array.isArray(v);
		case "object": return v !== null && typeof v === "object" && !Array.isArray(v);
		default: return true;
	}
}
function* errors(schema, value, path = "") {
	if (!schema || typeof schema !== "object") return;
	if (schema.not && Object.keys(schema.not).length === 0) { yield { path, message: "Expected never", value }; return; }
	if (schema.type !== undefined) {
		const types = Array.isArray(schema.type) ? schema.type : [schema.type];
		if (!types.some((t) => typeOk(t, value))) { yield { path, message: `Expected ${types.join(" | ")}`, value }; return; }
	}
	if (schema.const !== undefined && schema.const !== value) yield { path, message: `Expected ${JSON.stringify(schema.const)}`, value };
	if (Array.isArray(schema.enum) && !schema.enum.some((e) => e === value)) yield { path, message: `Expected one of ${JSON.stringify(schema.enum)}`, value };
	if (Array.isArray(schema.anyOf) && !schema.anyOf.some((s) => errors(s, value, path).next().done)) yield { path, message: "Expected union value", value };
	if (Array.isArray(schema.allOf)) for (const s of schema.allOf) yield* errors(s, value, path);
	if (typeof value === "string") {
		if (schema.minLength !== undefined && value.length < schema.minLength) yield { path, message: `Expected string length >= ${schema.minLength}`, value };
		if (schema.maxLength !== undefined && value.length > schema.maxLength) yield { path, message: `Expected string length <= ${schema.maxLength}`, value };
		if (schema.pattern !== undefined) { try { if (!new RegExp(schema.pattern).test(value)) yield { path, message: `Expected string to match ${schema.pattern}`, value }; } catch {} }
	}
	if (typeof value === "number") {
		if (schema.minimum !== undefined && value < schema.minimum) yield { path, message: `Expected number >= ${schema.minimum}`, value };
		if (schema.maximum !== undefined && value > schema.maximum) yield { path, message: `Expected number <= ${schema.maximum}`, value };
	}
	if (Array.isArray(value)) {
		if (schema.minItems !== undefined && value.length < schema.minItems) yield { path, message: `Expected at least ${schema.minItems} items`, value };
		if (schema.maxItems !== undefined && value.length > schema.maxItems) yield { path, message: `Expected at most ${schema.maxItems} items`, value };
		if (Array.isArray(schema.items)) for (let i = 0; i < schema.items.length; i++) yield* errors(schema.items[i], value[i], `${path}/${i}`);
		else if (schema.items) for (let i = 0; i < value.length; i++) yield* errors(schema.items, value[i], `${path}/${i}`);
	}
	if (value !== null && typeof value === "object" && !Array.isArray(value)) {
		for (const k of schema.required ?? []) if (!(k in value)) yield { path: `${path}/${k}`, message: "Expected required property", value: undefined };
		const props = schema.properties ?? {};
		for (const [k, s] of Object.entries(props)) if (k in value && value[k] !== undefined) yield* errors(s, value[k], `${path}/${k}`);
		if (schema.patternProperties) {
			for (const [pat, s] of Object.entries(schema.patternProperties)) {
				let re; try { re = new RegExp(pat); } catch { continue; }
				for (const k of Object.keys(value)) if (re.test(k)) yield* errors(s, value[k], `${path}/${k}`);
			}
		}
		if (schema.additionalProperties === false) for (const k of Object.keys(value)) if (!(k in props)) yield { path: `${path}/${k}`, message: "Unexpected property", value: value[k] };
	}
}
function defaults(schema, value) {
	if (value === undefined && schema && schema.default !== undefined) return clone(schema.default);
	if (schema && schema.properties && value && typeof value === "object" && !Array.isArray(value)) {
		for (const [k, s] of Object.entries(schema.properties)) {
			const d = defaults(s, value[k]);
			if (d !== undefined) value[k] = d;
		}
	}
	return value;
}
export const Value = {
	Check: (schema, value) => errors(schema, value).next().done === true,
	Errors: (schema, value) => [...errors(schema, value)],
	Default: (schema, value) => defaults(schema, value),
	Clone: (value) => clone(value),
	Clean: (_schema, value) => value,
	Convert: (_schema, value) => value,
	Parse: (schema, value) => {
		const first = errors(schema, value).next();
		if (!first.done) throw new Error(`${first.value.path || "/"}: ${first.value.message}`);
		return value;
	},
	Equal: (a, b) => JSON.stringify(a) === JSON.stringify(b),
};
export const Check = Value.Check;
export const Errors = Value.Errors;
export function Compile(schema) {
	return {
		Check: (v) => Value.Check(schema, v),
		Errors: (v) => Value.Errors(schema, v),
		Parse: (v) => Value.Parse(schema, v),
		Decode: (v) => Value.Parse(schema, v),
		Encode: (v) => v,
		Schema: () => schema,
	};
}
export const TypeCompiler = { Compile };
export const Kind = Symbol.for("TypeBox.Kind");
export const OptionalKind = Symbol.for("TypeBox.Optional");
export const FormatRegistry = { Set() {}, Get() {}, Has: () => false, Delete() {}, Clear() {} };
export const TypeGuard = {
	IsObject: (s) => s?.type === "object",
	IsString: (s) => s?.type === "string",
	IsOptional: isOptional,
	IsSchema: (s) => s !== null && typeof s === "object",
};
for (const [k, f] of Object.entries(Type)) if (typeof f === "function") TypeGuard[`Is${k}`] ??= (s) => s?.[KIND] === k;
const T = Type;
const T_String = T.String, T_Number = T.Number, T_Integer = T.Integer, T_Boolean = T.Boolean, T_Null = T.Null, T_Any = T.Any, T_Unknown = T.Unknown, T_Literal = T.Literal, T_Union = T.Union, T_Intersect = T.Intersect, T_Optional = T.Optional, T_Partial = T.Partial, T_Required = T.Required, T_Record = T.Record, T_Tuple = T.Tuple, T_Unsafe = T.Unsafe, T_Pick = T.Pick, T_Omit = T.Omit, T_Object = T.Object, T_Array = T.Array, T_Enum = T.Enum, T_Never = T.Never, T_Undefined = T.Undefined, T_Void = T.Void, T_Ref = T.Ref, T_Readonly = T.Readonly, T_KeyOf = T.KeyOf;
export { T_String as String, T_Number as Number, T_Integer as Integer, T_Boolean as Boolean, T_Null as Null, T_Any as Any, T_Unknown as Unknown, T_Literal as Literal, T_Union as Union, T_Intersect as Intersect, T_Optional as Optional, T_Partial as Partial, T_Required as Required, T_Record as Record, T_Tuple as Tuple, T_Unsafe as Unsafe, T_Pick as Pick, T_Omit as Omit, T_Object as Object, T_Array as Array, T_Enum as Enum, T_Never as Never, T_Undefined as Undefined, T_Void as Void, T_Ref as Ref, T_Readonly as Readonly, T_KeyOf as KeyOf };
export default Type;
