#!/usr/bin/env python3
"""Fails when the files of one folder of common/ or modules/ include or call each other in a loop.

    tests/check/cycles.py [--build DIR] [--root DIR] [--allow FILE] [-v]

Two graphs per folder (common/aws, common/kube, modules/ccm, ...), whose nodes are the folder's
files, a file's .c and .h counting as one node (client.c and client.h are "client"):

  include  A -> B when a file of A has  #include "<folder>/B.h"  (includes of other folders
           are not looked at: common/ never includes modules/, and a module's files include
           common/ by design)
  call     A -> B when A.o needs a symbol that B.o defines, read with nm from the object files
           of the build (DIR, default build/default: run make first); only objects whose
           source still exists count

and one graph of the folders themselves (A -> B when a file of A includes a header of B or
A's objects need a symbol of B's): it must be acyclic too, and no folder of common/ may need
one of modules/.

Calls go one way (entry -> topic files -> common/), so each graph must be acyclic. Every loop
found is printed as a path (ccm -> ccm_node -> ccm) with the symbols or includes of each step,
and the exit status is 1; 0 when there is none, 2 when an object is missing or older than its
source.
Loops known and left to other work are listed in cycles.allow beside this script (a line whose
loop is gone fails, so the list only shrinks). Standard library only.
"""
import argparse
import os
import re
import subprocess
import sys

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folders(root):
    for top in ("common", "modules"):
        base = os.path.join(root, top)
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            d = os.path.join(top, name)
            if os.path.isdir(os.path.join(root, d)):
                yield d


def stem(path):
    return os.path.splitext(os.path.basename(path))[0]


def sources(root, folder):
    out = []
    for name in sorted(os.listdir(os.path.join(root, folder))):
        if name.endswith((".c", ".h")):
            out.append(name)
    return out


def include_graph(root, folder):
    g, why = {}, {}
    for name in sources(root, folder):
        node = name
        g.setdefault(node, set())
        with open(os.path.join(root, folder, name), encoding="utf-8", errors="replace") as f:
            for line in f:
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                inc = m.group(1)
                if os.path.dirname(inc) != folder:
                    continue
                if not os.path.exists(os.path.join(root, inc)):
                    continue  # generated (csi.pb-c.h): not a file of the folder
                target = os.path.basename(inc)
                if target != node:
                    g[node].add(target)
                    g.setdefault(target, set())
                    why[(node, target)] = [f"#include \"{inc}\""]
    return g, why


def nm_symbols(obj):
    """(defined, undefined) global symbols of one object file."""
    res = subprocess.run(["nm", "-g", obj], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"nm {obj}: {res.stderr.strip()}")
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in ("U", "w", "v"):
            undefined.add(parts[1])
        elif len(parts) == 3 and parts[1] not in ("U", "w", "v"):
            defined.add(parts[2])
    return defined, undefined


def call_graph(root, build, folder):
    objs = {}
    for name in sources(root, folder):
        if not name.endswith(".c"):
            continue
        obj = os.path.join(build, folder, name[:-2] + ".o")
        if not os.path.exists(obj) or \
                os.path.getmtime(obj) < os.path.getmtime(os.path.join(root, folder, name)):
            return None, obj
        objs[stem(name)] = nm_symbols(obj)
    owner = {}
    for node, (defined, _) in objs.items():
        for s in defined:
            owner[s] = node
    g = {node: set() for node in objs}
    why = {}
    for node, (_, undefined) in objs.items():
        for s in sorted(undefined):
            t = owner.get(s)
            if t and t != node:
                g[node].add(t)
                why.setdefault((node, t), []).append(s)
    return g, why


def folder_graph(root, build):
    """Folder -> folder, by includes and by calls (symbols one folder's objects need and
    another's define)."""
    owner, needs, g, why = {}, {}, {}, {}
    for folder in folders(root):
        g.setdefault(folder, set())
        for name in sources(root, folder):
            path = os.path.join(root, folder, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                for line in f:
                    m = INCLUDE_RE.match(line)
                    inc = m.group(1) if m else ""
                    other = os.path.dirname(inc)
                    if other and other != folder and other.startswith(("common/", "modules/")) \
                            and os.path.exists(os.path.join(root, inc)):
                        g[folder].add(other)
                        g.setdefault(other, set())
                        why.setdefault((folder, other), []).append(f"{name} includes {inc}")
            if name.endswith(".c"):
                obj = os.path.join(build, folder, name[:-2] + ".o")
                defined, undefined = nm_symbols(obj)
                for s in defined:
                    owner[s] = folder
                needs.setdefault(folder, set()).update(undefined)
    for folder, undefined in needs.items():
        for s in sorted(undefined):
            t = owner.get(s)
            if t and t != folder:
                g[folder].add(t)
                why.setdefault((folder, t), []).append(s)
    return g, why


def cycles(g):
    """The strongly connected components of more than one node (Tarjan), each as a loop."""
    index, low, on, stack, comps = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        # iterative Tarjan: (node, iterator over its successors)
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return [loop_path(g, c) for c in comps]


def loop_path(g, comp):
    """One loop through the component's first node, by breadth-first search."""
    members, start = set(comp), comp[0]
    prev, queue = {start: None}, [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(g[v]):
            if w not in members:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                path.reverse()
                return path + [start], comp
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp + [start], comp


def load_allowed(path):
    """Known loops left to other work: lines "FOLDER KIND NODE,NODE,..." (# comments)."""
    allowed = {}
    if not path or not os.path.exists(path):
        return allowed
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 3 or parts[1] not in ("include", "call"):
                raise SystemExit(f"cycles: {path}:{n}: expected 'FOLDER include|call A,B,...'")
            allowed[(parts[0], parts[1], tuple(sorted(parts[2].split(","))))] = n
    return allowed


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description="loops of includes or calls between the files "
                                 "of one folder of common/ and modules/")
    ap.add_argument("--root", default=os.path.join(here, "..", ".."))
    ap.add_argument("--build", default=None, help="object folder (default ROOT/build/default)")
    ap.add_argument("--allow", default=os.path.join(here, "cycles.allow"),
                    help="known loops to tolerate (default: cycles.allow beside this script)")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every edge")
    a = ap.parse_args()
    root = os.path.abspath(a.root)
    build = os.path.abspath(a.build) if a.build else os.path.join(root, "build", "default")
    allowed = load_allowed(a.allow)
    seen = set()

    found, tolerated, graphs = 0, 0, 0
    for folder in folders(root):
        ig = include_graph(root, folder)
        cg = call_graph(root, build, folder)
        if cg[0] is None:
            print(f"cycles: {cg[1]} is missing or older than its source: build first (make)",
                  file=sys.stderr)
            return 2
        for kind, (g, why) in (("include", ig), ("call", cg)):
            graphs += 1
            if a.verbose:
                for v in sorted(g):
                    for w in sorted(g[v]):
                        print(f"{folder}: {kind} {v} -> {w}: {' '.join(why[(v, w)])}")
            for path, comp in cycles(g):
                key = (folder, kind, tuple(comp))
                if key in allowed:
                    seen.add(key)
                    tolerated += 1
                    print(f"known {folder}: {kind} loop: {' -> '.join(path)} "
                          f"(cycles.allow line {allowed[key]})")
                    continue
                found += 1
                print(f"FAIL {folder}: {kind} loop: {' -> '.join(path)}")
                for v, w in zip(path, path[1:]):
                    syms = why[(v, w)]
                    more = f" (+{len(syms) - 4} more)" if len(syms) > 4 else ""
                    print(f"    {v} -> {w}: {', '.join(syms[:4])}{more}")
                if len(comp) > len(path) - 1:
                    print(f"    every file in the loop: {', '.join(comp)}")
    # between folders: common/ never needs modules/, and the folders of common/ do not loop
    fg, fwhy = folder_graph(root, build)
    graphs += 1
    for path, comp in cycles(fg):
        key = ("folders", "call", tuple(comp))
        if key in allowed:
            seen.add(key)
            tolerated += 1
            print(f"known folders: loop: {' -> '.join(path)} (cycles.allow line {allowed[key]})")
            continue
        found += 1
        print(f"FAIL folders: loop: {' -> '.join(path)}")
        for v, w in zip(path, path[1:]):
            print(f"    {v} -> {w}: {', '.join(fwhy[(v, w)][:4])}")
    for v in sorted(fg):
        for w in sorted(fg[v]):
            if v.startswith("common/") and w.startswith("modules/"):
                found += 1
                print(f"FAIL {v} needs {w}: {', '.join(fwhy[(v, w)][:4])}")
    for key, n in sorted(allowed.items(), key=lambda kv: kv[1]):
        if key not in seen:
            found += 1
            print(f"FAIL cycles.allow line {n}: {key[0]} {key[1]} {','.join(key[2])} "
                  "is no longer a loop: remove the line")
    if found:
        print(f"cycles: {found} problem(s) in {graphs} graphs")
        return 1
    print(f"cycles: no loop in {graphs} graphs (includes and calls in each of "
          f"{(graphs - 1) // 2} folders, and between folders)"
          f"{f'; {tolerated} known, listed in cycles.allow' if tolerated else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
