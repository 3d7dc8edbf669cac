#!/usr/bin/env bash
# The test command's static checks (tools/scripts/test.sh runs them after the
# build, before ctest):
#  1. no tracked source file (.h .cpp .cu .cuh .td) under lib/ dialects/
#     runtime/ tools/ is over 800 lines;
#  2. clang-tidy-22 (.clang-tidy; runtime/, bench/ and test/ adjust it) on the
#     .cpp files that a change touches, compiled as build/compile_commands.json
#     says; any warning fails, named with its file and check.
# The change: the files that differ between a base and the working tree (HEAD
# and any uncommitted edit), the base HEAD~1 (in CI, a clean clone of main:
# the last landed change) or FSDP_LINT_BASE=<ref>. Its .cpp files are
# checked, and for a changed header every .cpp that includes it (the build's
# header dependencies, ninja -t deps); a changed .clang-tidy or .td (the
# generated headers) checks every file. Without HEAD~1 (a shallow clone)
# every file is checked too: the whole tree takes 3 to 5 minutes on 2
# cores, and skipping would let unchecked code pass.
# CUDA sources (.cu, .cuh) only get the line count: clang-tidy cannot parse
# them with the build's nvcc flags.
# Usage: tools/scripts/lint.sh [--all]
#   --all: every .cpp of lib/ dialects/ runtime/ tools/ bench/ test/unit/.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd -P)
build=build
tidy=${CLANG_TIDY:-clang-tidy-22}
runner=${RUN_CLANG_TIDY:-run-clang-tidy-22}
jobs=${JOBS:-2}
all=0
case "${1:-}" in
  --all) all=1 ;;
  "") ;;
  *) echo "usage: tools/scripts/lint.sh [--all]" >&2; exit 2 ;;
esac

#===--- 1. File sizes -----------------------------------------------------===#

long=$(git ls-files -z -- lib dialects runtime tools |
  grep -zE '\.(h|cpp|cu|cuh|td)$' | xargs -0 wc -l |
  awk '$2 != "total" && $1 > 800 { print "  " $2 ": " $1 " lines" }')
if [ -n "$long" ]; then
  echo "lint: source files over 800 lines (split them):" >&2
  echo "$long" >&2
  exit 1
fi
echo "lint: no source file under lib/ dialects/ runtime/ tools/ over 800 lines"

#===--- 2. clang-tidy -----------------------------------------------------===#

for tool in "$tidy" "$runner"; do
  command -v "$tool" > /dev/null ||
    { echo "lint: $tool not found (tools/scripts/setup.sh installs clang-tidy-22)" >&2; exit 1; }
done
[ -f "$build/compile_commands.json" ] ||
  { echo "lint: $build/compile_commands.json missing (run tools/scripts/build.sh)" >&2; exit 1; }

changed=""
if [ "$all" = 1 ]; then
  why="--all"
else
  if [ -n "${FSDP_LINT_BASE:-}" ]; then
    base=$FSDP_LINT_BASE
    git rev-parse -q --verify "$base^{commit}" > /dev/null ||
      { echo "lint: FSDP_LINT_BASE=$base is not a commit" >&2; exit 2; }
  elif git rev-parse -q --verify 'HEAD~1^{commit}' > /dev/null; then
    base=HEAD~1
  else
    base=""
  fi
  if [ -z "$base" ]; then
    all=1
    why="no HEAD~1 to compare with (a shallow clone): every file"
  else
    changed=$(git diff --name-only --diff-filter=d "$base" --
              git ls-files --others --exclude-standard)
    why="the change since $base"
  fi
fi

# The files to check: compile_commands.json's .cpp files under the checked
# directories, all of them or those the change touches.
list=$(LINT_CHANGED=$changed python3 - "$root" "$build" "$all" <<'EOF'
import json, os, subprocess, sys

root, build, check_all = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
dirs = ("lib/", "dialects/", "runtime/", "tools/", "bench/", "test/unit/")

def rel(path, base):
    return os.path.relpath(os.path.realpath(os.path.join(base, path)), root)

candidates = set()
for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
    f = rel(entry["file"], entry["directory"])
    if f.endswith(".cpp") and f.startswith(dirs):
        candidates.add(f)
changed = {line for line in os.environ["LINT_CHANGED"].split("\n") if line}
if any(os.path.basename(f) == ".clang-tidy" or f.endswith(".td")
       for f in changed):
    check_all = True
if check_all:
    selected = set(candidates)
    tracked = subprocess.run(["git", "ls-files", "--", *dirs], text=True,
                             capture_output=True, check=True).stdout.split()
    for f in sorted(t for t in tracked if t.endswith(".cpp")):
        if f not in candidates:
            print(f"lint: {f} is not built in this configuration: not checked",
                  file=sys.stderr)
else:
    selected = {f for f in changed if f in candidates}
    headers = {f for f in changed if f.endswith((".h", ".inc", ".def"))}
    if headers:
        # ninja -t deps: each object's source, then every header it includes.
        deps = subprocess.run(["ninja", "-C", build, "-t", "deps"], text=True,
                              capture_output=True, check=True).stdout
        source = None
        for line in deps.split("\n"):
            if line and not line.startswith(" "):
                source = None  # the next dependency is the source
            elif line.strip():
                path = rel(line.strip(), build)
                if source is None:
                    source = path
                elif path in headers and source in candidates:
                    selected.add(source)
print("\n".join(sorted(selected)))
EOF
)
files=()
[ -z "$list" ] || mapfile -t files <<< "$list"

if [ "${#files[@]}" -eq 0 ]; then
  echo "lint: clang-tidy: no C++ file to check ($why)"
  exit 0
fi
echo "lint: clang-tidy on ${#files[@]} files ($why), -j $jobs"
# run-clang-tidy takes a regular expression of the paths to check.
regex=$(python3 -c 'import re, sys
print("^(" + "|".join(re.escape(f) for f in sys.argv[1:]) + ")$")' \
  "${files[@]/#/$root/}")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$SECONDS
if ! "$runner" -p "$build" -j "$jobs" -quiet \
    -clang-tidy-binary "$(command -v "$tidy")" "$regex" > "$log" 2>&1; then
  echo "lint: clang-tidy found problems (rerun one file for the details:" \
    "$tidy -p $build FILE):" >&2
  grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error): ' "$log" |
    sed -e "s#^$root/##" -e 's/,-warnings-as-errors\]$/]/' | sort -u >&2 ||
    tail -n 50 "$log" >&2
  exit 1
fi
echo "lint: clang-tidy clean ($((SECONDS - start))s)"
