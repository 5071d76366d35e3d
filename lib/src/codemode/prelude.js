// The globals of a codemode script, built once per script on top of the
// host functions in `__host` (which this prelude takes and removes). The
// value of this file is the API the engine drives: start, settle, finish,
// format and writes.
(function () {
  "use strict";
  const host = globalThis.__host;
  delete globalThis.__host;
  const init = JSON.parse(host.init);
  const pending = new Map();
  const MAX_VALUE = 262144;
  const MAX_TOTAL = 1048576;

  const emit = (kind, payload) => {
    const e = host.emit(kind, payload);
    if (e) throw new RangeError(e);
  };
  const show = (v) => {
    if (typeof v === "string") return v;
    const j = JSON.stringify(v);
    return j === undefined ? String(v) : j;
  };

  const names = new Set(init.tools.map((t) => t.name));
  const aliases = new Map(init.aliases);
  const call = (name, args) => {
    const json = JSON.stringify(args === undefined ? {} : args);
    const id = host.call(name, json === undefined ? "{}" : json);
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  };
  const tools = new Proxy(Object.freeze(Object.create(null)), {
    get(_t, prop) {
      if (typeof prop !== "string") return undefined;
      const name = names.has(prop) ? prop : aliases.get(prop);
      if (name !== undefined) return (args) => call(name, args);
      if (prop === "then" || prop === "toJSON") return undefined;
      throw new TypeError(
        `tools.${prop} does not exist. ALL_TOOLS lists every tool; searchTools(query) finds tools by topic. Check for a member with "${prop}" in tools.`,
      );
    },
    has(_t, prop) {
      return names.has(prop) || aliases.has(prop);
    },
    ownKeys() {
      return [...names];
    },
    getOwnPropertyDescriptor(_t, prop) {
      if (!names.has(prop)) return undefined;
      return { value: (args) => call(prop, args), enumerable: true, configurable: true };
    },
  });

  const text = (value) => {
    emit("text", show(value));
  };
  const consoleLine = (...args) => {
    emit("console", args.map(show).join(" "));
  };
  const console = Object.freeze({
    log: consoleLine,
    info: consoleLine,
    warn: consoleLine,
    error: consoleLine,
    debug: consoleLine,
  });

  const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
  const image = (value) => {
    let data;
    let mimeType;
    let url;
    if (typeof value === "string") url = value;
    else if (value && typeof value === "object" && "image_url" in value) {
      url = typeof value.image_url === "string" ? value.image_url : value.image_url && value.image_url.url;
    } else if (value && typeof value === "object") {
      if (value.type !== "image") {
        throw new TypeError(`image only accepts image blocks, got ${JSON.stringify(value.type)}`);
      }
      data = value.data;
      mimeType = value.mimeType;
    } else {
      throw new TypeError("image() takes a data: URL, an { image_url } object, or an image block");
    }
    if (url !== undefined) {
      if (typeof url !== "string") throw new TypeError("image_url must be a string or { url }");
      const m = /^data:([^;,]+);base64,(.*)$/s.exec(url);
      if (!m) throw new TypeError("image() only accepts base64 data: URLs; remote URLs are not supported");
      mimeType = m[1];
      data = m[2];
    }
    if (typeof data !== "string" || typeof mimeType !== "string") {
      throw new TypeError("an image block needs string data and mimeType");
    }
    if (!IMAGE_TYPES.includes(mimeType)) {
      throw new TypeError(`image() accepts PNG, JPEG, GIF and WebP, got ${mimeType}`);
    }
    emit("image", JSON.stringify({ data, mimeType }));
  };

  const exit = () => {
    host.exit();
    throw new Error("exit");
  };

  const saved = init.store;
  const set = Object.create(null);
  const deleted = new Set();
  let total = Object.values(saved).reduce((n, v) => n + JSON.stringify(v).length, 0);
  const current = (key) => {
    if (key in set) return set[key];
    if (deleted.has(key) || !Object.prototype.hasOwnProperty.call(saved, key)) return undefined;
    return saved[key];
  };
  const store = (key, value) => {
    if (typeof key !== "string") throw new TypeError("store() keys must be strings");
    const before = current(key);
    const beforeSize = before === undefined ? 0 : JSON.stringify(before).length;
    if (value === undefined) {
      delete set[key];
      deleted.add(key);
      total -= beforeSize;
      return;
    }
    const json = JSON.stringify(value);
    if (json === undefined) throw new TypeError("store() values must be JSON");
    if (json.length > MAX_VALUE) {
      throw new RangeError(`store() value for "${key}" has ${json.length} characters of JSON; the limit is ${MAX_VALUE}`);
    }
    if (total - beforeSize + json.length > MAX_TOTAL) {
      throw new RangeError(`store() values would have ${total - beforeSize + json.length} characters of JSON in all; the limit is ${MAX_TOTAL}`);
    }
    total += json.length - beforeSize;
    set[key] = JSON.parse(json);
    deleted.delete(key);
  };
  const load = (key) => {
    const v = current(key);
    return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
  };

  const query = (kind, a, b) => {
    const out = host.query(kind, a === undefined ? "" : String(a), JSON.stringify(b === undefined ? {} : b));
    return Promise.resolve(out === "" ? undefined : JSON.parse(out));
  };
  const ALL_TOOLS = Object.freeze(init.tools.map((t) => Object.freeze({ name: t.name, description: t.description })));
  const searchTools = (q, opts) => query("search", q, opts);
  const describeTool = (name) => query("tool", name);
  const describeNamespace = (name) => query("namespace", name);

  const noModel = (kind) => () =>
    Promise.resolve({ provider: "", model: "", stopReason: "error", errorMessage: `${kind} is not available in this toolkit: it has no ${kind === "classify" ? "classifier" : "image"} models` });
  const models = Object.freeze({
    getModelsOfType: (type, provider) => query("models", type, { provider, available: false }),
    getAvailableOfType: (type, provider) => query("models", type, { provider, available: true }),
    getModelOfType: (type, provider, id) => query("model", type, { provider, id }),
    classify: noModel("classify"),
    generateImages: noModel("generateImages"),
  });
  const started = Date.now();
  const performance = Object.freeze({ now: () => Date.now() - started });

  const globals = { tools, text, image, console, exit, store, load, ALL_TOOLS, searchTools, describeTool, describeNamespace, models, performance };
  for (const [k, v] of Object.entries(globals)) {
    Object.defineProperty(globalThis, k, { value: v, enumerable: true, writable: false, configurable: false });
  }

  const frames = (stack) =>
    String(stack || "")
      .split("\n")
      .filter((l) => l.includes("codemode.js"))
      .join("\n");
  const format = (e) => {
    if (e instanceof Error) {
      const head = `${e.name}: ${e.message}`;
      const f = frames(e.stack);
      return f ? `${head}\n${f}` : head;
    }
    if (typeof e === "string") return `Error: ${e}`;
    return `Error: ${show(e)}`;
  };

  function run(fn) {
    return fn();
  }
  return {
    start: (fn) => run(fn),
    settle: (id, ok, payload) => {
      const p = pending.get(id);
      if (!p) return;
      pending.delete(id);
      if (ok) p.resolve(JSON.parse(payload));
      else p.reject(new Error(payload));
    },
    finish: (value) => {
      if (value !== undefined) text(value);
    },
    format,
    writes: () => {
      const keys = Object.keys(set);
      if (keys.length === 0 && deleted.size === 0) return "";
      return JSON.stringify({ set, delete: [...deleted].filter((k) => !(k in set)) });
    },
  };
})()
