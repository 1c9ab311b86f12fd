#!/usr/bin/env bash
# check_layers.sh — checks that no library of the build has two files calling each other in a
# circle, and that core/ is layered. Every library target (static, shared, module or object
# library; executables are not checked) whose sources lie under a FAMILY is its own graph:
#   core/     libgrpo; its folders, bottom to top, are
#               base  text  io  host  config  train  pack  cli       (docs/ARCHITECTURE.md)
#             and a file may call into, or include a header of, its own folder or a folder below
#             only (a folder's testing.h, the entry points only tests call, is included by no
#             other folder);
#   kernels/  the CPU backend (grpo_kernels_cpu), the CUDA backend modules (grpo_kernels_cuda_emu,
#             and grpo_kernels_cuda when a toolkit was found), the emulation's runtime;
#   plugins/  each pack's library (grpo-dense, grpo-rewards-builtin, ...).
# It reports (1) every call or #include from a lower folder of core/ up into a higher one, and
# (2) the circles between the files of one library (file A calls something defined in file B and
# B, directly or through others, calls something defined in A), which are wrong even inside one
# folder: each is named with its target, its files, and the edges and symbols that make it.
#
# usage: scripts/check_layers.sh [BUILD_DIR] [FAMILY...]
#   BUILD_DIR  a configured and built tree (default: build); the targets are found in it as
#              CMakeFiles/<target>.dir folders (Makefile or Ninja generator), the source tree
#              from its CMakeCache.txt (else the tree this script is in)
#   FAMILY     a source path prefix: the targets with a source under it are checked
#              (default: core/ kernels/ plugins/)
#
# How: `nm` gives, for each object file, the global symbols it defines and the ones it leaves
# undefined. A file that leaves a symbol undefined that another file of the same target defines
# depends on that file (symbols defined by more than one file, C++ inline copies, are no edge).
# The strongly connected components of that graph with more than one file are the circles.
# Includes are read from the sources. An object whose source is gone (moved or renamed since
# the tree was built) is stale and skipped. Exit status: 0 when everything holds, 1 when not,
# 2 when the objects cannot be read (no build tree, or no target for a FAMILY).
#
# ctest runs it per family: core_layers, plugins_layers, kernels_layers (tests/check_layers.cmake;
# kernels_layers is DISABLED until the kernels/ op-table rewrite lands: today the backends'
# files and cpu_backend.c / cuda_backend.c call each other), and check_layers_fixture shows it
# fails on a circle and on a call or include up a layer.
set -euo pipefail

layers="base text io host config train pack cli"

build=${1:-build}
(($# > 0)) && shift
families=("$@")
((${#families[@]})) || families=(core/ kernels/ plugins/)
if [[ ! -d "$build" ]]; then
    echo "check_layers: $build: no such directory (configure and build first)" >&2
    exit 2
fi
build=$(cd "$build" && pwd)
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[[ -n "$src" && -d "$src" ]] || src=$(cd "$(dirname "$0")/.." && pwd)

# source_of TARGET_DIR OBJECT: the source (relative to $src when inside it) that OBJECT, a path
# relative to TARGET_DIR, was compiled from; nothing when it is gone. CMake names an object after
# its source relative to the target's folder, ".." written "__"; a generated one-line wrapper
# (`#include "x.cu"`, the emulated CUDA backend) stands for the file it includes.
source_of() {
    local sub=${1%/CMakeFiles/*} rel=${2%.o}
    rel=${rel%.obj}
    sub=${sub#"$build"}
    [[ /$rel/ == */__/* ]] &&
        rel=$(sed 's#\(^\|/\)__\(/\|$\)#\1..\2#g; s#\(^\|/\)__\(/\|$\)#\1..\2#g' <<<"$rel")
    local f="$src$sub/$rel"
    if [[ ! -f "$f" && -f "$build$sub/$rel" ]]; then
        f=$(sed -n '/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\(.*\)"/{s//\1/p;q}' \
            "$build$sub/$rel")
        [[ $f == /* && $(grep -c '^[[:space:]]*[^/[:space:]]' "$build$sub/$rel") == 1 ]] ||
            f=$build$sub/$rel
    fi
    [[ -f "$f" ]] || return 0
    [[ $f == */../* ]] && f=$(realpath -m "$f")
    echo "${f#"$src/"}"
}

# is_executable TARGET_DIR: the target links an executable (Makefile: link.txt neither archives
# nor links -shared; Ninja: an *_EXECUTABLE_LINKER__<target>_ rule). Object libraries link nothing.
is_executable() {
    local name=${1##*/}
    name=${name%.dir}
    if [[ -f "$1/link.txt" ]]; then
        if grep -qE '(^|/)(llvm-|gcc-)?ar [a-z]* |(^| )-shared( |$)' "$1/link.txt"; then
            return 1
        fi
    elif [[ -f "$build/build.ninja" ]]; then
        awk -v n="$name" '$1 == "build" && $3 ~ /^[A-Z]+_EXECUTABLE_LINKER__/ {
                r = $3; sub(/^[A-Z]+_EXECUTABLE_LINKER__/, "", r)  # <target>_<config>
                if (substr(r, 1, length(n) + 1) == n "_" && substr(r, length(n) + 2) !~ /_/) f = 1
            } END { exit !f }' "$build/build.ninja"
    else
        return 1
    fi
}

# The target folders of this build tree, leaving out nested build trees (try-compiles, trees
# that tests configure inside it).
nested=$(find "$build" -mindepth 2 -name CMakeCache.txt -printf '%h\n')
targets=()
while IFS= read -r td; do
    skip=0
    while IFS= read -r n; do [[ -n "$n" && $td == "$n"/* ]] && skip=1 && break; done <<<"$nested"
    ((skip)) || targets+=("$td")
done < <(find "$build" -type d -name '*.dir' | grep -E '/CMakeFiles/[^/]+\.dir$' | sort)

include_re='^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z]*\/[^"]*\)".*'
rank_of() {
    local i=0
    for l in $layers; do [[ $l == "$1" ]] && { echo $i; return; }; i=$((i + 1)); done
    echo -1
}

# Includes: "LAYER/name.h" in a file of core/ must name its own layer or one below.
check_core_includes() {
    local bad=0 f rel mine rm_ inc theirs rt
    while IFS= read -r f; do
        rel=${f#"$src/"}; mine=$(echo "$rel" | cut -d/ -f2); rm_=$(rank_of "$mine")
        if ((rm_ < 0)); then
            echo "$rel: not in a layer folder (core/{${layers// /,}}/)"; bad=1; continue
        fi
        while IFS= read -r inc; do
            theirs=${inc%%/*}; rt=$(rank_of "$theirs")
            if [[ ${inc#*/} == testing.h && $theirs != "$mine" ]]; then
                echo "$rel: includes $inc: a layer's testing.h is for tests and its own files only"
                bad=1
            elif ((rt > rm_)); then
                echo "$rel: includes $inc: $mine may not include from $theirs (a layer above)"
                bad=1
            fi
        done < <(sed -n "s/$include_re/\\1/p" "$f")
    done < <(find "$src/core" -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort)
    return $bad
}

# check_target NAME FAMILY TARGET_DIR OBJECT=SOURCE...: the circles among the target's files
# and the calls up a layer between files of core/; status 1 when there is any.
check_target() {
    local name=$1 family=$2 td=$3 table pair
    shift 3
    table=$(for pair in "$@"; do
        local o=${pair%%=*} s=${pair#*=}
        nm -g --defined-only "$td/$o" | awk -v f="$s" 'NF >= 3 && $2 != "U" { print "D", f, $3 }'
        nm -u "$td/$o" | awk -v f="$s" '{ print "U", f, $NF }'
    done)
    awk -v nfiles=$# -v layers="$layers" -v target="$name" -v family="$family" '
    $1 == "D" { if (!(($3, $2) in seen)) { seen[$3, $2]; ndef[$3]++; def[$3] = $2 }; next }
    $1 == "U" { use[++nu] = $2 SUBSEP $3 }
    END {
        # edges a -> b with the symbols behind them (one definer only: C++ inline copies are none)
        for (i = 1; i <= nu; i++) {
            split(use[i], p, SUBSEP)
            a = p[1]; s = p[2]
            if (!(s in def) || ndef[s] > 1 || def[s] == a) continue
            b = def[s]
            if (!((a, b) in edge)) { edge[a, b] = s; node[a]; node[b] }
            else edge[a, b] = edge[a, b] " " s
        }
        # calls up: a file of a lower layer of core/ using a symbol defined in a higher one
        nl = split(layers, L, " ")
        for (i = 1; i <= nl; i++) rank[L[i]] = i
        nup = 0
        for (k in edge) {
            split(k, ab, SUBSEP)
            split(ab[1], pa, "/"); split(ab[2], pb, "/")
            if (pa[1] != "core" || pb[1] != "core" || !(pa[2] in rank) || !(pb[2] in rank))
                continue
            if (rank[pb[2]] > rank[pa[2]]) {
                printf "%s: %s (%s) calls up into %s (%s): %s\n", target, ab[1], pa[2], ab[2],
                       pb[2], edge[k]
                nup++
            }
        }
        # transitive closure (a few dozen files: cubic is fine)
        n = 0
        for (f in node) name[++n] = f
        for (i = 1; i <= n; i++) for (j = 1; j <= n; j++) reach[i, j] = ((name[i], name[j]) in edge)
        for (k = 1; k <= n; k++) for (i = 1; i <= n; i++) if (reach[i, k])
            for (j = 1; j <= n; j++) if (reach[k, j]) reach[i, j] = 1
        # strongly connected components: files that reach each other
        ncyc = 0
        for (i = 1; i <= n; i++) {
            if (done[i] || !reach[i, i]) continue
            ncyc++
            members = ""
            for (j = 1; j <= n; j++) if (j == i || (reach[i, j] && reach[j, i])) {
                done[j] = 1; comp[j] = ncyc; members = members " " name[j]
            }
            printf "%s: cycle %d:%s\n", target, ncyc, members
            for (a = 1; a <= n; a++) if (comp[a] == ncyc)
                for (b = 1; b <= n; b++) if (comp[b] == ncyc && (name[a], name[b]) in edge)
                    printf "  %s -> %s: %s\n", name[a], name[b], edge[name[a], name[b]]
        }
        if (ncyc || nup) {
            printf "%s (%s): %d cycle(s), %d call(s) up a layer among %d files\n", target, family,
                   ncyc, nup, nfiles
            exit 1
        }
        printf "%s (%s): no cycles, no call up a layer among %d files\n", target, family, nfiles
    }' <<<"$table"
}

status=0
declare -A checked
for family in "${families[@]}"; do
    found=0
    for td in "${targets[@]}"; do
        [[ -n "${checked[$td]:-}" ]] && continue
        pairs=(); mine=0
        while IFS= read -r o; do
            s=$(source_of "$td" "$o")
            if [[ -z "$s" ]]; then
                echo "check_layers: $td/$o: stale (its source is gone), skipped" >&2
                continue
            fi
            pairs+=("$o=$s")
            [[ $s == "$family"* ]] && mine=1
        done < <(cd "$td" && find . \( -name '*.o' -o -name '*.obj' \) | sed 's|^\./||' | sort)
        ((mine)) || continue
        is_executable "$td" && continue
        checked[$td]=1; found=1
        name=${td##*/}
        check_target "${name%.dir}" "$family" "$td" "${pairs[@]}" || status=1
    done
    if ((!found)); then
        echo "check_layers: no library target with sources under $family in $build" \
             "(build first)" >&2
        exit 2
    fi
    if [[ $family == core/ ]]; then
        if check_core_includes; then
            echo "core/: no include up a layer"
        else
            echo "core/: includes up a layer (above)"; status=1
        fi
    fi
done
if ((status)); then
    echo "check_layers: FAILED: circles or calls/includes up a layer (above)"
else
    echo "check_layers: layers hold in ${families[*]}"
fi
exit $status
