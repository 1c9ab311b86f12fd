#!/usr/bin/env bash
# check_layers.sh — checks that core/ is layered: its folders, bottom to top, are
#   base  text  io  host  config  train  pack  cli        (docs/ARCHITECTURE.md)
# and a file may call into, or include a header of, its own folder or a folder below only (a
# folder's testing.h, the entry points only tests call, is included by no other folder). It
# reports (1) every call or #include from a lower folder up into a higher one, and (2) circles
# between files (file A calls something defined in file B and B, directly or through others,
# calls something defined in A), which are wrong even inside one folder.
#
# usage: scripts/check_layers.sh [BUILD_DIR] [PREFIX]
#   BUILD_DIR  a configured and built tree (default: build); the object files of libgrpo are read
#              from BUILD_DIR/CMakeFiles/grpo.dir
#   PREFIX     only files whose source path starts with it count (default: core/)
#
# How: `nm` gives, for each object file, the global symbols it defines and the ones it leaves
# undefined. A file that leaves a symbol undefined that another file defines depends on that file.
# The strongly connected components of that graph with more than one file are the circles; each is
# printed with the edges inside it and the symbols that make them. Includes are read from the
# sources. Exit status: 0 when the layering holds, 1 when it does not, 2 when the objects cannot be
# read.
set -euo pipefail

layers="base text io host config train pack cli"

build=${1:-build}
prefix=${2:-core/}
objdir="$build/CMakeFiles/grpo.dir"
if [[ ! -d "$objdir" ]]; then
    echo "check_layers: $objdir: no such directory (build first: cmake --build $build)" >&2
    exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
# Objects of sources that no longer exist (a file moved or renamed since the tree was built) are
# stale: left out, so they cannot report a circle that the sources no longer have.
objs=()
while IFS= read -r o; do
    if [[ -f "$root/${o%.o}" ]]; then
        objs+=("$o")
    else
        echo "check_layers: $o: stale (its source is gone), skipped" >&2
    fi
done < <(cd "$objdir" && find . -name '*.o' -path "./$prefix*" | sed 's|^\./||' | sort)
if ((${#objs[@]} == 0)); then
    echo "check_layers: no object files for $prefix under $objdir (build the grpo target first)" >&2
    exit 2
fi

# One line per symbol: "D file symbol" (defined, global) or "U file symbol" (undefined).
table=$(for o in "${objs[@]}"; do
    src=${o%.o}
    nm -g --defined-only "$objdir/$o" | awk -v f="$src" 'NF >= 3 && $2 != "U" { print "D", f, $3 }'
    nm -u "$objdir/$o" | awk -v f="$src" '{ print "U", f, $NF }'
done)

# Includes: "LAYER/name.h" in a file of core/ must name its own layer or one below.
rank_of() { local i=0; for l in $layers; do [[ $l == "$1" ]] && { echo $i; return; }; i=$((i+1)); done; echo -1; }
bad_includes=0
if [[ $prefix == core/ ]]; then
    while IFS= read -r f; do
        rel=${f#"$root/"}; mine=$(echo "$rel" | cut -d/ -f2); rm_=$(rank_of "$mine")
        if ((rm_ < 0)); then
            echo "$rel: not in a layer folder (core/{${layers// /,}}/)"; bad_includes=1; continue
        fi
        while IFS= read -r inc; do
            theirs=${inc%%/*}; rt=$(rank_of "$theirs")
            if [[ ${inc#*/} == testing.h && $theirs != "$mine" ]]; then
                echo "$rel: includes $inc: a layer's testing.h is for tests and its own files only"
                bad_includes=1
            elif ((rt > rm_)); then
                echo "$rel: includes $inc: $mine may not include from $theirs (a layer above)"
                bad_includes=1
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([a-z]*\/[^"]*\)".*/\1/p' "$f")
    done < <(find "$root/core" -type f \( -name '*.c' -o -name '*.h' \) | sort)
fi

awk -v nfiles="${#objs[@]}" -v layers="$layers" -v bad_includes="$bad_includes" '
    $1 == "D" { def[$3] = $2; next }
    $1 == "U" { use[++nu] = $2 SUBSEP $3 }
    END {
        # edges a -> b with the symbols behind them
        for (i = 1; i <= nu; i++) {
            split(use[i], p, SUBSEP)
            a = p[1]; s = p[2]
            if (!(s in def) || def[s] == a) continue
            b = def[s]
            if (!((a, b) in edge)) { edge[a, b] = s; node[a]; node[b] }
            else edge[a, b] = edge[a, b] " " s
        }
        # calls up: a file of a lower layer using a symbol defined in a higher one
        nl = split(layers, L, " ")
        for (i = 1; i <= nl; i++) rank[L[i]] = i
        nup = 0
        for (k in edge) {
            split(k, ab, SUBSEP)
            split(ab[1], pa, "/"); split(ab[2], pb, "/")
            if (!(pa[2] in rank) || !(pb[2] in rank)) continue
            if (rank[pb[2]] > rank[pa[2]]) {
                printf "%s (%s) calls up into %s (%s): %s\n", ab[1], pa[2], ab[2], pb[2], edge[k]
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
            printf "cycle %d:%s\n", ncyc, members
            for (a = 1; a <= n; a++) if (comp[a] == ncyc)
                for (b = 1; b <= n; b++) if (comp[b] == ncyc && (name[a], name[b]) in edge)
                    printf "  %s -> %s: %s\n", name[a], name[b], edge[name[a], name[b]]
        }
        if (ncyc || nup || bad_includes) {
            printf "%d cycle(s), %d call(s) up a layer among %d files%s\n", ncyc, nup, nfiles,
                   bad_includes ? "; includes up a layer (above)" : ""
            exit 1
        }
        printf "layers hold: no cycles, no call or include up a layer among %d files\n", nfiles
    }' <<<"$table"
