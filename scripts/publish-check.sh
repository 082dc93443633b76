#!/usr/bin/env bash
# Checks that every crate of the workspace is ready to publish (run after scripts/setup.sh):
# - the manifest fields crates.io and docs.rs show (description, licence, readme, repository,
#   keywords, categories, docs.rs metadata);
# - the packaged file list: licence files and the readme in every crate, no file over 1 MB and
#   no package over 5 MB (tests, fixtures, models, the exporter stay in the repository);
# - `cargo publish --workspace --dry-run`: packages every crate and builds each from its
#   package, the way crates.io users get it (the TVM crate with tvm-ffi-config on PATH, from
#   the pinned apache-tvm-ffi in .venv);
# - the docs build as docs.rs builds them (DOCS_RS=1, the docs.rs features), the TVM crate's
#   without tvm-ffi-config anywhere on PATH.
#
#   bash scripts/publish-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || { echo "error: $PY missing; run: bash scripts/setup.sh" >&2; exit 1; }
# Dependencies at opt-level 0: the verification builds only need to compile.
o0=(--config 'profile.dev.package."*".opt-level=0')

echo "== manifest fields"
cargo metadata --format-version 1 --no-deps > "${TMPDIR:-/tmp}/dashrank-metadata.json"
"$PY" - "${TMPDIR:-/tmp}/dashrank-metadata.json" <<'PY'
import json, sys
bad = []
for p in json.load(open(sys.argv[1]))["packages"]:
    name = p["name"]
    if p.get("publish") == []:
        print(f"{name} {p['version']}: publish = false (not a crates.io crate)")
        continue
    for field in ("description", "license", "repository", "readme", "homepage"):
        if not p.get(field):
            bad.append(f"{name}: no {field}")
    if not 1 <= len(p["keywords"]) <= 5:
        bad.append(f"{name}: {len(p['keywords'])} keywords (crates.io takes 1 to 5)")
    if not p["categories"]:
        bad.append(f"{name}: no categories")
    if "rs" not in ((p.get("metadata") or {}).get("docs") or {}):
        bad.append(f"{name}: no [package.metadata.docs.rs]")
    print(f"{name} {p['version']}: {p['license']}, keywords {', '.join(p['keywords'])}")
if bad:
    sys.exit("error: " + "; ".join(bad))
PY

echo "== packaged files"
# The crates that go to crates.io (the Python crate, `publish = false`, ships as the wheel).
published=$(cargo metadata --format-version 1 --no-deps | "$PY" -c '
import json, sys
print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"] if p.get("publish") != []))')
for crate in $published; do
  list=$(cargo package -p "$crate" --list --allow-dirty --locked)
  for f in LICENSE-MIT LICENSE-APACHE README.md Cargo.toml; do
    grep -qx "$f" <<< "$list" || { echo "error: $crate's package lacks $f" >&2; exit 1; }
  done
  if grep -E '^(tests|benches|examples|fuzz|onnx|models)/|\.(onnx|csr|mtx|pth)$' <<< "$list"; then
    echo "error: $crate's package holds test data, models or tools (above)" >&2
    exit 1
  fi
  echo "$crate: $(wc -l <<< "$list") files"
done

echo "== cargo publish --workspace --dry-run"
want=$(sed -n 's/^apache-tvm-ffi==//p' ffi-examples/tvm/requirements.txt)
have=$("$PY" -c 'import importlib.metadata as m; print(m.version("apache-tvm-ffi"))' 2>/dev/null || true)
[ "$have" = "$want" ] || .venv/bin/pip install --quiet --disable-pip-version-check -r ffi-examples/tvm/requirements.txt
target=$(cargo metadata --format-version 1 --no-deps | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
log=$target/publish-dry-run.log
touch "$log.start"
# The dry run verifies each crate against its workspace dependencies packaged into a local
# registry under $target/package, and cargo unpacks those into $CARGO_HOME/registry/src/<hash of
# that registry's path>/<crate>-<version>, reusing a directory a previous run left there: a
# second run from the same checkout path would build against the first run's sources. Those
# unpacked copies of this workspace's crates are removed first (crates.io's stay).
cargo_home=${CARGO_HOME:-$HOME/.cargo}
unpacked=$(cargo metadata --format-version 1 --no-deps | "$PY" -c '
import json, sys
print(" ".join(p["name"] + "-" + p["version"] for p in json.load(sys.stdin)["packages"]))')
for crate in $unpacked; do
  for dir in "$cargo_home"/registry/src/*/"$crate"; do
    case "$dir" in */index.crates.io-*/*|*/github.com-*/*|*'*'*) continue ;; esac
    rm -rf "$dir"
  done
done
if ! PATH=$PWD/.venv/bin:$PATH cargo publish --workspace --dry-run --allow-dirty --locked "${o0[@]}" > "$log" 2>&1; then
  cat "$log" >&2
  echo "error: cargo publish --workspace --dry-run failed (above)" >&2
  exit 1
fi
grep -E '^ *(Packaged|Verifying|Uploading)' "$log" || true
# The .crate files the dry run made (tmp-crate with --workspace; package/ otherwise).
crates=$(find "$target/package" -maxdepth 2 -name 'dashrank*.crate' -newer "$log.start" | sort)
[ -n "$crates" ] || { echo "error: the dry run left no .crate files under $target/package" >&2; exit 1; }
for crate in $crates; do
  name=$(basename "$crate" .crate)
  grep -q "/tmp-registry/" <<< "$crate" && continue
  size=$(stat -c %s "$crate")
  [ "$size" -le 5000000 ] || { echo "error: $name's package is $size bytes" >&2; exit 1; }
  biggest=$(tar -tvzf "$crate" | sort -k3 -n | tail -1 | awk '{print $3, $6}')
  [ "${biggest%% *}" -le 1000000 ] || { echo "error: $name packages a file over 1 MB: $biggest" >&2; exit 1; }
  echo "$name: $size bytes compressed, largest file $biggest"
done

echo "== docs as docs.rs builds them"
features=$(cargo metadata --format-version 1 --no-deps | "$PY" -c '
import json, sys
p = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "dashrank")
print(",".join(p["metadata"]["docs"]["rs"].get("features", [])))')
doclog=$target/publish-docs.log
docs() { # cargo doc ARGS, as docs.rs runs it; the log is printed when it fails
  DOCS_RS=1 cargo doc --no-deps --locked "$@" >> "$doclog" 2>&1 || { cat "$doclog" >&2; exit 1; }
}
: > "$doclog"
docs -p dashrank --features "$features"
docs -p dashrank-capi
nopath=$(tr ':' '\n' <<< "$PATH" | grep -v "$PWD/.venv" | paste -sd:)
if PATH=$nopath command -v tvm-ffi-config >/dev/null; then
  echo "error: tvm-ffi-config is on PATH outside .venv; cannot check the TVM crate's docs without it" >&2
  exit 1
fi
PATH=$nopath docs -p dashrank-tvm
echo "rustdoc warnings: $(grep -c '^warning' "$doclog" || true) (in $doclog)"
echo "docs: dashrank (features $features), dashrank-capi, dashrank-tvm (no tvm-ffi-config): ok"
echo "== publish check: ok"
