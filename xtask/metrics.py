#!/usr/bin/env python3
"""Module coupling and function lengths of crates/wgpu-server/src (issue 20's figures).

Usage, from the repository root:
  python3 xtask/metrics.py . device,memory,stream,launch,timing,graph,collective,server,lib,prelude
(the second argument: the floors, ground first, for the imports that run up;
`cargo xtask tidy` checks there are none).
"""
import os, re, sys, itertools
root = sys.argv[1] if len(sys.argv) > 1 else '.'
src = os.path.join(root, 'crates/wgpu-server/src')
# top-level module of a file
def top(path):
    rel = os.path.relpath(path, src)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith('.rs') else first
files = []
for d, _, fs in os.walk(src):
    for f in fs:
        if f.endswith('.rs'):
            files.append(os.path.join(d, f))
mods = sorted({top(f) for f in files})
imports = {}  # (a, b) -> count
# names lib.rs re-exports, by the module that defines them
REEXPORT = {}
lib = open(os.path.join(src, 'lib.rs')).read()
for m in re.finditer(r'pub use ([a-z_]+)::(?:[a-z_:]*::)?\{?([^;]*?)\}?;', lib):
    for name in re.split(r'[,\s]+', m.group(2)):
        name = name.split('::')[-1].strip()
        if name:
            REEXPORT[name] = m.group(1)
for m in re.finditer(r'pub type ([A-Za-z]+)', lib):
    REEXPORT.setdefault(m.group(1), 'lib')
def targets(text):
    out = []
    # use crate::{...} groups and crate::x paths
    for m in re.finditer(r'crate::\{([^;]*?)\};', text, re.S):
        for part in re.split(r',', m.group(1)):
            part = part.strip()
            if part:
                out.append(part.split('::')[0].strip('{ '))
    for m in re.finditer(r'crate::([A-Za-z_]+)', text):
        out.append(m.group(1))
    res = []
    for t in out:
        if t in mods: res.append(t)
        elif t in REEXPORT: res.append(REEXPORT[t])
    return res
for f in files:
    a = top(f)
    text = open(f).read()
    for b in targets(text):
        if b != a and b in mods:
            imports[(a, b)] = imports.get((a, b), 0) + 1
pairs = set()
for (a, b) in imports:
    pairs.add(tuple(sorted((a, b))))
order = sys.argv[2].split(',') if len(sys.argv) > 2 else None
print(f"modules ({len(mods)}): {mods}")
print(f"pairs importing each other (either way): {len(pairs)} of {len(mods)*(len(mods)-1)//2}")
both = [p for p in pairs if (p[0], p[1]) in imports and (p[1], p[0]) in imports]
print(f"pairs importing both ways: {len(both)}")
if order:
    rank = {m: i for i, m in enumerate(order)}
    up = [(a, b) for (a, b) in imports if a in rank and b in rank and rank[b] > rank[a]]
    print(f"imports running up ({len(up)} module edges): {sorted(up)}")
# function lengths
lens = []
for f in files:
    lines = open(f).read().split('\n')
    i = 0
    while i < len(lines):
        m = re.match(r'\s*(pub(\([a-z]+\))?\s+)?(async\s+)?(unsafe\s+)?fn\s+([a-zA-Z0-9_]+)', lines[i])
        if m and not lines[i].strip().startswith('//'):
            depth = 0; started = False; j = i
            while j < len(lines):
                code = lines[j].split('//')[0]
                depth += code.count('{') - code.count('}')
                if '{' in code: started = True
                if started and depth <= 0: break
                if not started and code.rstrip().endswith(';'): break
                j += 1
            if started:
                lens.append((j - i + 1, os.path.relpath(f, src), m.group(5)))
            i = j + 1 if started else i + 1
        else:
            i += 1
lens.sort(reverse=True)
print("five longest functions:", [(n, f"{p}::{fn}") for n, p, fn in lens[:5]])
