"""No call cycles between files (issue 40): in each C target (the hub's
objects, each plugin's), file A uses file B when A leaves undefined a
symbol that B defines (`nm -u`, `nm --defined-only -g` on their object
files). A cycle (a strongly connected component of more than one file,
Tarjan's algorithm) fails the test, printed as a walk through every file
of it: `hub/a.c -> hub/b.c -> hub/a.c`. A file with no cycle can be read,
tested and moved without the files that use it.

The build writes the object files of each target to call_cycles.txt (see
tests/CMakeLists.txt): one line per target, tab-separated: its name, its
source folder (relative to the tree) and its object files.

Usage: /usr/bin/python3 tests/call_cycles.py LIST   (ctest runs it as
lint.call_cycles in the build tree that wrote LIST).
"""
import os
import subprocess
import sys
from collections import deque

# Cycles known and being removed, each the set of its files. It is empty
# and should stay so: an entry is a debt with a deadline (one branch
# merged), and one whose cycle no longer exists fails the test, so the
# list cannot outlive its cycle.
ALLOWED: list = []


def symbols(objects, *flags):
    """{object file: set of symbol names} as `nm -A FLAGS` lists them, one
    run for the whole target."""
    out = subprocess.run(["nm", "-A", *flags, *objects], capture_output=True, text=True,
                         check=True)
    found = {obj: set() for obj in objects}
    for line in out.stdout.splitlines():
        # "FILE:VALUE TYPE NAME", or "FILE:   U NAME" (C names hold no ':')
        obj, _, rest = line.rpartition(":")
        if obj in found and rest.split():
            found[obj].add(rest.split()[-1])
    return found


def source_name(folder, obj):
    """hub/config/config.c for .../hub/CMakeFiles/fanhub_core.dir/config/config.c.o"""
    tail = obj.split(".dir/", 1)[-1]
    if tail.endswith(".o"):
        tail = tail[:-2]
    return tail if folder in ("", ".") else folder + "/" + tail


def graph(folder, objects):
    """{file: set of files it uses} of one target."""
    defined = symbols(objects, "--defined-only", "-g")
    if not any(defined.values()):
        # GCC's LTO objects hold no symbol table nm can read: no graph.
        raise ValueError("nm finds no symbols in its object files (built with LTO?)")
    undefined = symbols(objects, "-u")
    defined_by = {}
    for obj, names in defined.items():
        for sym in names:
            defined_by.setdefault(sym, set()).add(source_name(folder, obj))
    edges = {}
    for obj, names in undefined.items():
        name = source_name(folder, obj)
        edges[name] = {other for sym in names for other in defined_by.get(sym, ())
                       if other != name}
    return edges


def components(edges):
    """The strongly connected components of more than one file (Tarjan),
    iterative so that a long chain does not reach Python's recursion
    limit."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def path(edges, members, start, goal):
    """The files of a shortest path from start to goal inside members,
    start left out (goal may be start: the way back)."""
    came = {}
    queue = deque([start])
    while queue and goal not in came:
        node = queue.popleft()
        for child in sorted(edges[node] & members):
            if child not in came:
                came[child] = node
                queue.append(child)
    steps = [goal]
    while came[steps[-1]] != start:
        steps.append(came[steps[-1]])
    return steps[::-1]


def walk(edges, component):
    """A closed walk through every file of component, from the first by
    name: 'a.c -> b.c -> a.c'."""
    order = sorted(component)
    steps = [order[0]]
    for goal in order[1:]:
        if goal not in steps:
            steps += path(edges, component, steps[-1], goal)
    steps += path(edges, component, steps[-1], order[0])
    return " -> ".join(steps)


def read_list(listing):
    """[(target, folder, objects)] from call_cycles.txt."""
    targets = []
    with open(listing, encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) >= 2:
                targets.append((fields[0], fields[1], [o for o in fields[2:] if o]))
    return targets


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    failures = []
    seen = []
    checked = 0
    unread = False  # a target not read: its cycles are unknown
    for target, folder, objects in read_list(argv[1]):
        missing = [o for o in objects if not os.path.exists(o)]
        if not objects or missing:
            failures.append(f"{target}: object files not built: {' '.join(missing) or 'none'}")
            unread = True
            continue
        try:
            edges = graph(folder, objects)
        except ValueError as e:
            failures.append(f"{target}: {e}")
            unread = True
            continue
        checked += len(objects)
        for component in components(edges):
            if component in seen:
                continue  # two plugins built from the same files
            seen.append(component)
            if component not in ALLOWED:
                failures.append(f"{target}: cycle: {walk(edges, component)}")
    for allowed in ALLOWED:
        if allowed not in seen and not unread:
            failures.append("allowed cycle no longer there, remove it from ALLOWED in "
                            f"tests/call_cycles.py: {' '.join(sorted(allowed))}")
    for line in failures:
        print(line)
    if not failures:
        print(f"no call cycles between files ({checked} object files, "
              f"{len(ALLOWED)} allowed cycle(s))")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
