#!/usr/bin/env python3
"""The include check of tidegate's layers (DESIGN.md "Layers", cmake/TidegateLayers.cmake).

Every folder of library code is one component with a layer number and the components it may
use (generated/layers.txt, written by CMake from the tidegate_component() calls). This script
fails when
  - a component uses a component of a higher layer (the CMake declarations themselves), or
  - a file includes (with quotes) a header of a component its own component does not use,
    directly or through the components it uses.
Angle-bracket includes (system and third-party headers) and the public headers under
include/tidegate/ are not judged. A quoted include that resolves nowhere in the tree (a
generated .inc) is accepted only if it exists in the build's generated/ folder.

Usage: check_layers.py --table BUILD/generated/layers.txt --root SOURCE_DIR
                       [--extra FILE=VIRTUAL_PATH ...]
--extra checks FILE as if it lived at VIRTUAL_PATH (relative to the root); the test suite uses
it to show that an upward include on a temporary file is refused.
Exit status: 0 when clean, 1 on violations (each printed with file:line), 2 on usage errors.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = (".h", ".hpp", ".cc", ".cpp", ".c", ".cu", ".cuh", ".inc")


class Component:
    def __init__(self, target, folder, layer, uses):
        self.target = target
        self.folder = folder
        self.layer = layer
        self.uses = uses


def read_table(path):
    components = {}
    with open(path, encoding="utf-8") as table:
        for line in table:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            target, folder, layer, uses = line.split("|")
            used = [u for u in uses.split(",") if u]
            components[target] = Component(target, folder, int(layer), used)
    return components


def closure(components, target):
    """Every component `target` may use: itself and, transitively, what it uses."""
    seen = {target}
    stack = [target]
    while stack:
        for used in components[stack.pop()].uses:
            if used in components and used not in seen:
                seen.add(used)
                stack.append(used)
    return seen


def owner(components, relative_path):
    """The component whose folder holds `relative_path` (the longest folder prefix wins)."""
    best = None
    for component in components.values():
        prefix = component.folder + "/"
        if relative_path.startswith(prefix):
            if best is None or len(component.folder) > len(best.folder):
                best = component
    return best


def resolve(root, including_path, include):
    """The include's path relative to the root, or None when it is not in the tree."""
    candidates = [
        os.path.join(os.path.dirname(including_path), include),  # next to the includer
        os.path.join("src", include),                            # the src/ include root
        include,                                                 # the project root
    ]
    for candidate in candidates:
        normal = os.path.normpath(candidate)
        if os.path.isfile(os.path.join(root, normal)):
            return normal
    return None


def check_declarations(components):
    problems = []
    for component in components.values():
        for used in component.uses:
            if used not in components:
                continue  # a library outside the layers (MPI::MPI_C, ...)
            other = components[used]
            if other.layer > component.layer:
                problems.append(
                    f"{component.folder} (layer {component.layer}) uses {other.folder} "
                    f"(layer {other.layer}): a component may only use lower layers or, "
                    f"explicitly, siblings of its own layer")
    return problems


def check_file(components, root, generated, real_path, virtual_path):
    component = owner(components, virtual_path)
    if component is None:
        return []
    allowed = closure(components, component.target)
    problems = []
    with open(real_path, encoding="utf-8", errors="replace") as source:
        for number, line in enumerate(source, start=1):
            match = INCLUDE.match(line)
            if not match:
                continue
            include = match.group(1)
            if include.startswith("tidegate/"):
                continue  # the public API is usable from every layer
            target_path = resolve(root, virtual_path, include)
            if target_path is None:
                if generated and os.path.isfile(os.path.join(generated, include)):
                    continue
                problems.append(f"{virtual_path}:{number}: includes \"{include}\", which is "
                                f"not a file of the source tree")
                continue
            used = owner(components, target_path)
            if used is None or used.target in allowed:
                continue
            may_use = sorted(components[t].folder for t in allowed if t != component.target)
            problems.append(
                f"{virtual_path}:{number}: includes \"{include}\" from {used.folder} "
                f"(layer {used.layer}), but {component.folder} (layer {component.layer}) may "
                f"only use: {', '.join(may_use) or 'nothing'}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--extra", action="append", default=[])
    args = parser.parse_args()

    components = read_table(args.table)
    if not components:
        print(f"check_layers: {args.table} lists no components", file=sys.stderr)
        return 2
    root = os.path.abspath(args.root)
    generated = os.path.dirname(os.path.abspath(args.table))

    problems = check_declarations(components)
    checked = 0
    for component in components.values():
        folder = os.path.join(root, component.folder)
        for directory, _, names in os.walk(folder):
            for name in sorted(names):
                if not name.endswith(SOURCE_SUFFIXES):
                    continue
                path = os.path.join(directory, name)
                relative = os.path.relpath(path, root)
                if owner(components, relative) is not component:
                    continue  # a nested component's file (transports/tcp inside transports)
                problems += check_file(components, root, generated, path, relative)
                checked += 1
    for extra in args.extra:
        real, _, virtual = extra.partition("=")
        if not virtual:
            print(f"check_layers: --extra wants FILE=VIRTUAL_PATH, got {extra}", file=sys.stderr)
            return 2
        problems += check_file(components, root, generated, real, os.path.normpath(virtual))
        checked += 1

    for problem in problems:
        print(problem)
    if problems:
        print(f"check_layers: {len(problems)} layer violation(s) in {checked} files "
              f"(see DESIGN.md 'Layers' and cmake/TidegateLayers.cmake)")
        return 1
    print(f"check_layers: {checked} files of {len(components)} components respect the layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
