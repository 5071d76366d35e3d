#!/usr/bin/env bash
# Regenerates lib/src/model/builtin-models.json: pi 1.6.0's built-in models
# for the providers the toolkit ships, asked from the real pi as a black box.
#
#   bash tests/oracle/dump-models.sh            # writes lib/src/model/builtin-models.json
#   bash tests/oracle/dump-models.sh OUT.json   # writes elsewhere
#
# How: `pi --mode rpc` with an empty agent dir, PI_OFFLINE=1 (the bundled
# catalogue, no pi.dev overlay) and a dummy key for every provider, answers
# `get_available_models` with every Model object. The per-provider default
# model is what pi selects at startup when only that provider has a key
# (`get_state`). Providers are written in pi's default-selection order.
#
# It also refreshes the expected outputs under tests/fixtures/models/expected/
# (pi's `--list-models` with every built-in key, and with the custom
# models.json fixture), which lib/tests/models.rs compares against.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/lib/src/model/builtin-models.json}"
fixtures="$root/tests/fixtures/models"
. "$here/env.sh"
[ "$PI_ORACLE_OK" = 1 ] || { echo "oracle missing: run tests/oracle/install.sh" >&2; exit 2; }

# provider=ENV_VAR, in pi's startup preference order (observed: drop the
# winner's key and ask again).
providers="anthropic=ANTHROPIC_API_KEY openai=OPENAI_API_KEY deepseek=DEEPSEEK_API_KEY google=GEMINI_API_KEY
openrouter=OPENROUTER_API_KEY xai=XAI_API_KEY groq=GROQ_API_KEY cerebras=CEREBRAS_API_KEY mistral=MISTRAL_API_KEY"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/cwd"

rpc() { # rpc <commands-json> <env...>
	local cmds="$1"; shift
	mkdir -p "$work/agent"; rm -rf "$work/agent"/*
	(cd "$work/cwd" && echo "$cmds" | env -i PATH="$PATH" HOME="$work" PI_CODING_AGENT_DIR="$work/agent" PI_OFFLINE=1 "$@" \
		"$NODE22" "$here/rpc-drive.mjs" -- $PI160 --mode rpc --no-session)
}

all_keys=()
for pv in $providers; do all_keys+=("${pv#*=}=dummy"); done
rpc '[{"type":"get_available_models"}]' "${all_keys[@]}" > "$work/models.json"

: > "$work/defaults.txt"
for pv in $providers; do
	rpc '[{"type":"get_state"}]' "${pv#*=}=dummy" > "$work/state.json"
	"$NODE22" -e 'const s=JSON.parse(require("fs").readFileSync(process.argv[1],"utf8"))[0].data;
		console.log(process.argv[2]+" "+s.model.id+" "+s.thinkingLevel)' "$work/state.json" "${pv%%=*}" >> "$work/defaults.txt"
done

"$NODE22" - "$work/models.json" "$work/defaults.txt" "$out" "$providers" <<'JS'
const fs = require("fs");
const [modelsPath, defaultsPath, outPath, providerList] = process.argv.slice(2);
const models = JSON.parse(fs.readFileSync(modelsPath, "utf8"))[0].data.models;
const defaults = Object.fromEntries(fs.readFileSync(defaultsPath, "utf8").trim().split("\n")
	.map((l) => l.split(" ")).map(([p, id, t]) => [p, { id, thinking: t }]));
const order = providerList.split(/\s+/).filter(Boolean).map((pv) => pv.split("=")[0]);
const lines = ["{", `"generatedBy": "tests/oracle/dump-models.sh (pi 1.6.0, bundled catalogue)",`, `"providers": [`];
order.forEach((p, pi) => {
	const ms = models.filter((m) => m.provider === p);
	const count = (k) => { const c = {}; for (const m of ms) c[m[k]] = (c[m[k]] || 0) + 1;
		return Object.entries(c).sort((a, b) => b[1] - a[1])[0][0]; };
	const api = count("api"), baseUrl = count("baseUrl");
	const head = { id: p, api, baseUrl, defaultModel: defaults[p].id, defaultThinkingLevel: defaults[p].thinking };
	lines.push(`${JSON.stringify(head).slice(0, -1)}, "models": [`);
	ms.forEach((m, i) => {
		const o = {};
		for (const [k, v] of Object.entries(m)) {
			if (k === "provider") continue;
			if (k === "api" && v === api) continue;
			if (k === "baseUrl" && v === baseUrl) continue;
			o[k] = v;
		}
		lines.push(JSON.stringify(o) + (i + 1 < ms.length ? "," : ""));
	});
	lines.push(`]}${pi + 1 < order.length ? "," : ""}`);
});
lines.push("]", "}");
fs.writeFileSync(outPath, lines.join("\n") + "\n");
console.error(`wrote ${outPath}: ${models.length} models`);
JS

# Expected outputs for lib/tests/models.rs.
mkdir -p "$fixtures/expected"
listing() { # listing <agent-dir-with-files-or-empty> <out> <env...>
	local src="$1" dest="$2"; shift 2
	mkdir -p "$work/agent"; rm -rf "$work/agent"/*
	[ -n "$src" ] && cp "$src"/*.json "$work/agent/"
	(cd "$work/cwd" && env -i PATH="$PATH" HOME="$work" PI_CODING_AGENT_DIR="$work/agent" PI_OFFLINE=1 "$@" $PI160 --list-models) > "$dest"
}
listing "" "$fixtures/expected/list-all.txt" "${all_keys[@]}"
listing "$fixtures/custom" "$fixtures/expected/list-custom.txt" ANTHROPIC_API_KEY=dummy
# (the search variant:)
(cd "$work/cwd" && env -i PATH="$PATH" HOME="$work" PI_CODING_AGENT_DIR="$work/agent" PI_OFFLINE=1 ANTHROPIC_API_KEY=dummy \
	$PI160 --list-models "opus 4") > "$fixtures/expected/list-custom-opus.txt"
mkdir -p "$work/agent"; rm -rf "$work/agent"/*; cp "$fixtures/custom"/*.json "$work/agent/"
(cd "$work/cwd" && echo '[{"type":"get_available_models"}]' | env -i PATH="$PATH" HOME="$work" PI_CODING_AGENT_DIR="$work/agent" PI_OFFLINE=1 \
	ANTHROPIC_API_KEY=dummy "$NODE22" "$here/rpc-drive.mjs" -- $PI160 --mode rpc --no-session) > "$work/custom.json"
"$NODE22" -e 'const fs=require("fs"); const ms=JSON.parse(fs.readFileSync(process.argv[1],"utf8"))[0].data.models;
	const keep=ms.filter((m)=>m.provider!=="anthropic"||["claude-opus-4-6","claude-custom"].includes(m.id));
	fs.writeFileSync(process.argv[2], keep.map((m)=>JSON.stringify(m)).join("\n")+"\n")' "$work/custom.json" "$fixtures/expected/custom-models.jsonl"
echo "wrote $fixtures/expected" >&2
