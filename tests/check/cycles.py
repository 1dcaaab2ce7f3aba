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


NM_CACHE = {}


def nm_symbols(obj):
    """(defined, undefined) global symbols of one object file."""
    if obj in NM_CACHE:
        return NM_CACHE[obj]
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
    NM_CACHE[obj] = (defined, undefined)
    return defined, undefined


def add_call_edges(needs, owner, g, why):
    """A -> B for each symbol A needs (needs[A]) that B defines (owner[symbol] == B)."""
    for node, undefined in needs.items():
        for s in sorted(undefined):
            t = owner.get(s)
            if t and t != node:
                g.setdefault(node, set()).add(t)
                why.setdefault((node, t), []).append(s)


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
    g, why = {node: set() for node in objs}, {}
    add_call_edges({node: u for node, (_, u) in objs.items()}, owner, g, why)
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
    add_call_edges(needs, owner, g, why)
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
            if len(parts) != 3 or parts[1] not in ("include", "call", "dependency"):
                raise SystemExit(f"cycles: {path}:{n}: expected "
                                 "'FOLDER include|call|dependency A,B,...'")
            allowed[(parts[0], parts[1], tuple(sorted(parts[2].split(","))))] = n
    return allowed


def steps(path, why):
    """The lines that show what each step of a loop is made of."""
    out = []
    for v, w in zip(path, path[1:]):
        syms = why[(v, w)]
        more = f" (+{len(syms) - 4} more)" if len(syms) > 4 else ""
        out.append(f"    {v} -> {w}: {', '.join(syms[:4])}{more}")
    return out


class Report:
    def __init__(self, allowed, verbose):
        self.allowed, self.verbose = allowed, verbose
        self.seen, self.found, self.tolerated, self.graphs = set(), 0, 0, 0

    def check(self, where, kind, g, why):
        """Reports the loops of one graph (known ones as such)."""
        self.graphs += 1
        if self.verbose:
            for v in sorted(g):
                for w in sorted(g[v]):
                    print(f"{where}: {kind} {v} -> {w}: {' '.join(why[(v, w)])}")
        for path, comp in cycles(g):
            key = (where, kind, tuple(comp))
            if key in self.allowed:
                self.seen.add(key)
                self.tolerated += 1
                print(f"known {where}: {kind} loop: {' -> '.join(path)} "
                      f"(cycles.allow line {self.allowed[key]})")
                continue
            self.found += 1
            print(f"FAIL {where}: {kind} loop: {' -> '.join(path)}")
            print("\n".join(steps(path, why)))
            if len(comp) > len(path) - 1:
                print(f"    every file in the loop: {', '.join(comp)}")

    def fail(self, text):
        self.found += 1
        print(f"FAIL {text}")


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
    rep = Report(allowed, a.verbose)

    n_folders = 0
    for folder in folders(root):
        cg = call_graph(root, build, folder)
        if cg[0] is None:
            print(f"cycles: {cg[1]} is missing or older than its source: build first (make)",
                  file=sys.stderr)
            return 2
        n_folders += 1
        rep.check(folder, "include", *include_graph(root, folder))
        rep.check(folder, "call", *cg)
    # between folders: they do not loop, and common/ never needs modules/
    fg, fwhy = folder_graph(root, build)
    rep.check("folders", "dependency", fg, fwhy)
    for v in sorted(fg):
        for w in sorted(fg[v]):
            if v.startswith("common/") and w.startswith("modules/"):
                rep.fail(f"{v} needs {w}: {', '.join(fwhy[(v, w)][:4])}")
    for key, n in sorted(allowed.items(), key=lambda kv: kv[1]):
        if key not in rep.seen:
            rep.fail(f"cycles.allow line {n}: {key[0]} {key[1]} {','.join(key[2])} "
                     "is no longer a loop: remove the line")
    if rep.found:
        print(f"cycles: {rep.found} problem(s) in {rep.graphs} graphs")
        return 1
    known = f"; {rep.tolerated} known, listed in cycles.allow" if rep.tolerated else ""
    print(f"cycles: no loop in {rep.graphs} graphs (includes and calls in each of {n_folders} "
          f"folders, and between folders){known}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
