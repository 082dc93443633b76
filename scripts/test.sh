#!/usr/bin/env bash
# README command 2: the whole test suite (Python exporter; Rust on the native engine on every
# SIMD path, then on tract and ONNX Runtime; C/C++ ABI installed with cargo-c, through
# pkg-config and CMake; stock TACO; TVM; the Python wheel; crates ready to publish; a Slurm array on a real single-node
# Slurm; every command block of the docs), plus format and lint gates.
# Installs what it needs through scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${DASHRANK_SHARED:-../shared}
# Every section header carries the minutes elapsed, so a CI log shows where the time goes.
START=$SECONDS
section() { printf '== [%d:%02d] %s\n' $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)) "$*"; }
bash scripts/setup.sh

section "format and lint (lean default build, tract + CLI, ONNX Runtime + CLI)"
cargo fmt --all -- --check
# Clippy only checks dependencies, but Cargo.toml's dev profile builds them at opt-level 2 (for
# fast debug tests), proc macros and build-script dependencies included; clippy needs no
# optimised dependencies, so it builds them at opt-level 0, which about halves the lint time.
lint_o0=(--config 'profile.dev.package."*".opt-level=0')
# The TVM crate is linted in scripts/tvm.sh (its build needs tvm-ffi-config), the Python
# crate in the Python package section (setup.sh built its wheel).
ws=(--workspace --exclude dashrank-tvm --exclude dashrank-python)
cargo clippy --quiet "${ws[@]}" --all-targets "${lint_o0[@]}" -- -D warnings
cargo clippy --quiet "${ws[@]}" --all-targets --features dashrank/tract,dashrank-cli/tract "${lint_o0[@]}" -- -D warnings
cargo clippy --quiet "${ws[@]}" --all-targets --features dashrank/onnxruntime,dashrank-cli/onnxruntime "${lint_o0[@]}" -- -D warnings
# Rustdoc, private items included (the featurizer's design is documented on them): every
# intra-doc link resolves and no comment reads as broken HTML. The CLI's binary has the
# library's name, so it is documented first, on its own (the library's pages overwrite it).
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --document-private-items -p dashrank-cli
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --no-deps --document-private-items -p dashrank -p dashrank-capi

# The cargo tools of later sections (cbindgen, cargo-c, cargo-fuzz) build from crates.io in the
# background while the Python sections leave a core idle; waited for before the TACO section.
# (cargo-c, once per machine, is the long one: it builds cargo itself.)
mkdir -p target
bash scripts/tools.sh > target/tools.log 2>&1 &
tools_pid=$!

section "Python exporter tests (this CPU's OpenBLAS kernels, then the Haswell/AVX2 ones)"
.venv/bin/python -m pytest onnx/tests -q
OPENBLAS_CORETYPE=Haswell .venv/bin/python -m pytest onnx/tests -q

section "reference outputs of the real WACO models (numpy oracle)"
mkdir -p target/golden
if [ -d "$SHARED/data/waco/matrices" ]; then
  for pair in spmm:SpMM sddmm:SDDMM spmv:SpMV; do
    kernel=${pair%%:*}
    upper=${pair##*:}
    out="target/golden/waco-$kernel.json"
    if [ ! -f "$out" ] || [ "models/waco-$kernel/.converted" -nt "$out" ]; then
      sched="$SHARED/data/waco/collected/$upper"
      if [ -d "$sched" ]; then lines=(--schedules "$sched"); else lines=(--random 100 --seed 1); fi
      .venv/bin/python -m dashrank_onnx.golden --bundle "models/waco-$kernel" \
        --matrices "$SHARED/data/waco/matrices" "${lines[@]}" --out "$out"
    fi
  done
fi

section "COGNATE checkpoint round trip: state dicts -> convert_cognate -> reference scores (numpy oracle)"
if [ -d "$SHARED/data/waco/matrices" ]; then
  out=target/golden/cognate
  if [ ! -f "$out/golden.json" ] \
     || [ -n "$(find onnx/dashrank_onnx -newer "$out/golden.json" -name '*.py' 2>/dev/null)" ]; then
    rm -rf "$out"
    .venv/bin/python -m dashrank_onnx.cognate_roundtrip --out "$out" --matrices "$SHARED/data/waco/matrices"
  fi
fi

section "full-size COGNATE bundle (seeded random weights) for the native-vs-ort parity test"
if [ ! -f models/cognate-full/.generated ] \
   || [ -n "$(find onnx/dashrank_onnx -newer models/cognate-full/.generated -name '*.py' 2>/dev/null)" ]; then
  rm -rf models/cognate-full
  .venv/bin/python -m dashrank_onnx.cognate --full-size --out models/cognate-full \
    --heads cpu-taco/spmm,spade/spmm,gpu-sparsetir/spmm,spade/sddmm
  touch models/cognate-full/.generated
fi

section "Rust tests, lean default build (native engine, pure Rust), best SIMD level"
cargo test --release "${ws[@]}" --all-targets
cargo test --release "${ws[@]}" --doc

# The same parity and determinism tests on the other kernels of this machine: a CPU-dependent
# result shows up here whatever CPU CI has (DASHRANK_SIMD caps the level; see src/simd).
for level in avx2 scalar; do
  section "Rust parity tests, native engine, SIMD forced to $level"
  DASHRANK_SIMD=$level cargo test --release --test real_waco --test fixture_parity --test native
done

# tract only runs the fixtures' and WACO's small dense graphs here, so its crates are compiled
# at opt-level 0: the build trades run speed the tests do not need (tract-core is the long
# crate) for build time. Release builds outside CI keep opt-level 3.
# The tests whose behaviour does not depend on the ort features (featurizer identity, the
# COGNATE round trip, spaces, hostile matrices, fuzz regressions, tuning through the C ABI)
# ran in the lean build above and run again on ONNX Runtime below.
tract_o0=()
for p in tract-core tract-data tract-linalg tract-hir tract-nnef tract-onnx tract-onnx-opl \
         tract-transformers ort-tract; do
  tract_o0+=(--config "profile.release.package.$p.opt-level=0")
done
section "Rust tests with tract (native-vs-tract parity, C ABI, CLI), then on the tract backend"
cargo test --release -p dashrank --features tract "${tract_o0[@]}" --lib \
  --test native --test fixture_parity --test real_waco --test bad_input --test threads \
  --test hostile_bundles
cargo test --release -p dashrank-capi --features tract "${tract_o0[@]}" --test abi
cargo test --release -p dashrank-cli --features tract "${tract_o0[@]}" --bins --test cli --test cli_space
DASHRANK_TEST_BACKEND=tract cargo test --release -p dashrank --features tract "${tract_o0[@]}" \
  --test real_waco --test fixture_parity --test bad_input --test threads

# The TACO tools and the C ABI section install the C library with cargo-c (scripts/tools.sh).
wait "$tools_pid" || { cat target/tools.log; echo "error: installing cargo tools failed" >&2; exit 1; }
cat target/tools.log

section "TACO: stock TACO from ../shared/vendor (cached), every printed program through it, a real tune per kernel"
taco_status=0
taco_prefix=$(bash scripts/taco.sh) || taco_status=$?
if [ $taco_status -eq 0 ]; then
  bash scripts/taco-tools.sh > /dev/null
  cargo build --release -p dashrank-cli
  .venv/bin/python scripts/taco-check.py --taco "$taco_prefix" --matrices mhd4800a,cavity24 \
    --kernels spmm,sddmm,spmv --top 5
  for kernel in spmm sddmm spmv; do
    # Each tune confirms on three operand instances in a second measurer process (the
    # default), but SpMM's in the search's own process (--confirm-instances 1); SpMV's also
    # runs one seed per loop order and two operand instances per program.
    extra=()
    [ "$kernel" = spmm ] && extra=(--confirm-instances 1)
    [ "$kernel" = spmv ] && extra=(--seeds-per-family 1 --instances 2)
    target/release/dashrank tune --model "models/waco-$kernel" --space taco --measurer taco \
      --matrix "$SHARED/data/waco/matrices/mhd4800a.csr" --budget 8 --top 3 --format json \
      "${extra[@]}" > "target/taco/tune-$kernel.json"
    .venv/bin/python - "target/taco/tune-$kernel.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
ms = r["measurements"]
assert ms[0]["is_default"] and ms[0]["ms"] is not None, "the default (TACO's CSR) is measured first"
assert 2 <= len(ms) <= 8 and r["best_ms"] is not None, r
assert r["speedup_over_default"] >= 1.0, r  # the default is among the measured
confirmed = [m for m in ms if m["confirmation"]]  # the search's last round: the default first
assert not confirmed or (confirmed[0]["is_default"] and ms[-len(confirmed):] == confirmed), r
print(f"{r['space']}: {len(ms)} measured through stock TACO, best {r['best_ms']:.4f} ms, "
      f"{r['speedup_over_default']:.2f}x TACO's CSR")
PY
  done
  # Operand instances: three per program time; none is refused as a bad argument (exit 2).
  measure=(target/taco/dashrank-taco-measure --matrix "$SHARED/data/waco/matrices/mhd4800a.csr" --kernel spmv)
  lines=$("${measure[@]}" --instances 3 csr "1 1 i1 i0 k1 k0 1 1 0 1 i1 48 128" | wc -l)
  [ "$lines" = 2 ] || { echo "dashrank-taco-measure --instances 3 printed $lines times, not 2"; exit 1; }
  status=0
  "${measure[@]}" --instances 0 csr 2> /dev/null || status=$?
  [ $status = 2 ] || { echo "dashrank-taco-measure --instances 0 exited $status, not 2"; exit 1; }
elif [ $taco_status -eq 3 ]; then
  echo "skipping the TACO section: ../shared/vendor/taco-*.tar.gz is not beside the checkout"
else
  exit $taco_status
fi

section "C ABI: cargo cinstall into a prefix (SONAME, headers, no TVM), C/C++ examples through pkg-config and CMake, valgrind, ASan"
bash scripts/ffi.sh

section "soak, short: one model, mixed calls over matrices of very different sizes (RSS, repeats)"
cargo run --release --quiet --example soak -- --calls 300 --every 100 --large-rows 65536

section "fuzz, short pass: every target briefly (long campaigns: docs/reliability.md)"
bash scripts/fuzz.sh --time 15 --jobs 2

section "TVM FFI module: tvm_ffi.load_module from Python ranks SparseTIR configurations"
CARGO_TARGET_DIR=target bash scripts/tvm.sh

section "Python package: the wheel setup.sh installed (every function, matrix form and error class, GIL, Ctrl-C, TVM FFI beside it, docs walk-through, mypy --strict, fresh venv)"
PYO3_PYTHON=$PWD/.venv/bin/python cargo clippy --quiet -p dashrank-python --all-targets "${lint_o0[@]}" -- -D warnings
# Scores are compared with this build's CLI and TVM module; the walk-through tunes through the
# TACO measurer when the TACO section built it.
DASHRANK_CLI=target/release/dashrank DASHRANK_TVM_LIB=target/release/libdashrank_tvm.so \
  .venv/bin/python -m pytest python/tests -q
section "crates ready to publish: manifests, package lists, cargo publish --workspace --dry-run, docs as docs.rs builds them"
bash scripts/publish-check.sh

section "Slurm: eval --shard auto as an sbatch array on a single-node cluster, dependent merge == unsharded run"
bash scripts/slurm-test.sh

section "docs: every command block of README.md and docs/*.md, run as written (outputs compared, CI workflows run)"
bash scripts/doc-test.sh

section "Rust tests, ONNX Runtime backend (libonnxruntime from the onnxruntime wheel)"
# Every test that loads a model through the Rust API runs here on ONNX Runtime; the ones
# that do not (featurizer identity, fuzz regressions, spaces and tuning through the C ABI,
# which loads natively) ran in the lean build above.
export DASHRANK_ORT_LIB=$(bash scripts/ort-lib.sh) DASHRANK_TEST_BACKEND=onnxruntime
cargo test --release -p dashrank --features onnxruntime --lib \
  --test native --test fixture_parity --test real_waco --test bad_input --test threads \
  --test hostile_bundles --test hostile_matrices --test spaces --test cognate_convert
cargo test --release -p dashrank-capi --features onnxruntime --test abi
cargo test --release -p dashrank-cli --features onnxruntime --bins --test cli --test cli_space
section "all tests passed"
