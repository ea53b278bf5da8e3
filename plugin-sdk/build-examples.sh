#!/usr/bin/env bash
# Rebuilds the example plugins (examples/plugins/{validation,counter,sum,spin}) into the
# components the tests load, examples/plugins/NAME.wasm, with their sha256 beside them
# (NAME.wasm.sha256, checked by plugins/tests/examples.rs). Needs the wasm32-wasip2 target.
set -euo pipefail
cd "$(dirname "$0")"
rustup target add wasm32-wasip2
cargo build --release --target wasm32-wasip2 --workspace --locked
for p in validation counter sum spin; do
    cp "target/wasm32-wasip2/release/basalt_plugin_$p.wasm" "../examples/plugins/$p.wasm"
    (cd ../examples/plugins && sha256sum "$p.wasm" > "$p.wasm.sha256")
done
ls -l ../examples/plugins/*.wasm
