"""Write the front end's protocol types from the kernel's: js/src/protocol.gen.ts.

nbstream/widgets/protocol.py declares the wire protocol once (TypedDicts,
Literals, constants). This turns the types it names in ``GENERATED`` into JSON
Schema (msgspec, which also checks the view's messages at run time, so the
schema is the one the kernel enforces), gives every field the ``#:`` comment
written above it in the Python source, and has json-schema-to-typescript (a
devDependency of js/) write the TypeScript; the constants in
``GENERATED_CONSTANTS`` follow as ``export const``. The result is formatted by
biome, as the rest of js/src.

    python scripts/gen_protocol.py           # (re)write js/src/protocol.gen.ts
    python scripts/gen_protocol.py --check   # exit 1 if it is stale (make lint)

Needs node and js/node_modules (``npm ci`` in js/).
"""

from __future__ import annotations

import argparse
import ast
import difflib
import importlib
import json
import re
import subprocess
import sys
import typing
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

JS = REPO / "js"
OUT = JS / "src" / "protocol.gen.ts"
MODULES = ("nbstream.widgets.protocol", "nbstream.core.pieces", "nbstream.core.attachment")
COMMAND = "python scripts/gen_protocol.py"

HEADER = f"""\
/**
 * The wire protocol's types and constants, GENERATED from nbstream/widgets/protocol.py
 * (and the core types it names, of nbstream/core/pieces.py and attachment.py)
 * by `{COMMAND}`: do not edit.
 * Change protocol.py and run that command; `make lint` fails while this file is stale.
 * What each message means, and the rules of the protocol, are written in protocol.py;
 * js/src/protocol.ts re-exports these types with the checks of what arrives.
 */
"""


def comments(module: Any) -> tuple[dict[str, str], dict[str, list[str]], dict[str, list[str]]]:
    """From ``module``'s source: the ``#:`` comment above each module-level name, the
    ``#:`` comment above each field (``"Class.field"``), each class's fields in the
    order written, and each class's bases."""
    source = Path(module.__file__).read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source)

    def above(node: ast.stmt) -> str:
        out: list[str] = []
        i = node.lineno - 2
        while i >= 0 and lines[i].strip().startswith("#:"):
            out.insert(0, lines[i].strip()[2:].strip())
            i -= 1
        return "\n".join(out)

    docs: dict[str, str] = {}
    fields: dict[str, list[str]] = {}
    bases: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            fields[node.name] = []
            bases[node.name] = [b.id for b in node.bases if isinstance(b, ast.Name)]
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    fields[node.name].append(item.target.id)
                    if text := above(item):
                        docs[f"{node.name}.{item.target.id}"] = text
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and (text := above(node)):
                    docs[t.id] = text
    return docs, fields, bases


def field_order(name: str, fields: dict[str, list[str]], bases: dict[str, list[str]]
                ) -> list[str]:
    """A class's own fields first, then its bases' (an ``...Extras`` base holds the
    optional ones)."""
    out = list(fields.get(name, []))
    for base in bases.get(name, []):
        out += [f for f in field_order(base, fields, bases) if f not in out]
    return out


def rst(text: str) -> str:
    """A doc comment's reST, as the TypeScript side writes it."""
    for role in (":class:", ":data:", ":func:", ":meth:", ":mod:", ":attr:"):
        text = text.replace(role, "")
    return text.replace("``", "`").replace("`~", "`")


def alias_schema(alias: Any, names: dict[int, str]) -> dict[str, Any]:
    """An alias's schema; a union of TypedDicts (ViewMsg: msgspec takes no such union)
    as the union of references to them. A union of tuples (DeltaRun: msgspec takes
    none either) is the union of references to the named ones, and a list or a union
    holding such a union (DeltaBody) is written around it."""
    args = typing.get_args(alias)
    if args and all(typing.is_typeddict(a) for a in args):
        return {"anyOf": [{"$ref": f"#/$defs/{names[id(a)]}"} for a in args]}
    try:
        schema: dict[str, Any] = msgspec.json.schema(alias)
    except TypeError:
        def part(a: Any) -> dict[str, Any]:
            return {"$ref": f"#/$defs/{names[id(a)]}"} if id(a) in names \
                else alias_schema(a, names)
        if typing.get_origin(alias) is list:
            return {"type": "array", "items": part(args[0])}
        if args:
            return {"anyOf": [part(a) for a in args]}
        raise
    schema.pop("$defs", None)  # a TypedDict it names is generated on its own
    return tuples(schema)


def tuples(schema: Any) -> Any:
    """``schema`` with each tuple (msgspec writes ``prefixItems``) as the ``items``
    list json-schema-to-typescript reads."""
    if isinstance(schema, list):
        return [tuples(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: tuples(v) for k, v in schema.items()}
    if "prefixItems" in out:
        out["items"] = out.pop("prefixItems")
        out["additionalItems"] = False
    return out


def build_schema() -> tuple[dict[str, Any], dict[str, Any]]:
    """(the JSON Schema with every generated type in its ``$defs``, the constants)."""
    protocol = importlib.import_module(MODULES[0])
    docs: dict[str, str] = {}
    fields: dict[str, list[str]] = {}
    bases: dict[str, list[str]] = {}
    for name in MODULES:
        d, f, b = comments(importlib.import_module(name))
        docs.update(d)
        fields.update(f)
        bases.update(b)

    names = {id(v): k for k, v in vars(protocol).items()}
    generated = {names[id(t)]: t for t in protocol.GENERATED}
    dicts = {n: t for n, t in generated.items() if typing.is_typeddict(t)}
    aliases = {n: t for n, t in generated.items() if n not in dicts}

    _, defs = msgspec.json.schema_components(list(dicts.values()),
                                             ref_template="#/$defs/{name}")
    # an alias (Status, Role...) is written inline by msgspec: name it where it occurs
    alias_schemas = {n: alias_schema(t, names) for n, t in aliases.items()}

    def named(schema: Any) -> Any:
        if isinstance(schema, dict):
            for n, s in alias_schemas.items():
                if schema == s:
                    return {"$ref": f"#/$defs/{n}"}
            schema = {k: named(v) for k, v in schema.items()}
            if schema.get("type") == "object" and "properties" not in schema:
                schema.setdefault("additionalProperties", True)  # dict[str, Any]
            return schema
        if isinstance(schema, list):
            return [named(s) for s in schema]
        return schema

    out: dict[str, Any] = {}
    for n in generated:
        if n in aliases:
            schema = dict(alias_schemas[n])
            if isinstance(schema.get("anyOf"), list):
                schema["anyOf"] = [named(s) for s in schema["anyOf"]]
        else:
            schema = defs[n]
            props = {k: named(v) for k, v in schema.get("properties", {}).items()}
            order = field_order(n, fields, bases)
            props = {k: props[k] for k in sorted(props, key=lambda k: (
                order.index(k) if k in order else len(order), k))}
            for k, v in props.items():
                if doc := docs.get(f"{n}.{k}") or next(
                        (docs[f"{b}.{k}"] for b in bases.get(n, []) if f"{b}.{k}" in docs), ""):
                    if "$ref" in v:  # beside a $ref, a description would make a new type
                        props[k] = v = {"anyOf": [v]}
                    v["description"] = rst(doc)
            schema = {**schema, "properties": props}
            schema.pop("title", None)
        doc = schema.pop("description", None) or docs.get(n)
        if doc:
            schema["description"] = rst(doc)
        out[n] = schema
    constants = {}
    for name in protocol.GENERATED_CONSTANTS:
        value = getattr(protocol, name)
        constants[name] = sorted(value) if isinstance(value, frozenset) else value
    return {"$defs": out}, constants


def typescript() -> str:
    """The text of js/src/protocol.gen.ts, formatted."""
    schema, constants = build_schema()
    # the root is only a holder of the $defs; its own declaration is dropped below
    root = "ProtocolRoot"
    types = subprocess.run(
        ["node", str(JS / "scripts" / "protocol-types.mjs")],
        input=json.dumps({"schema": schema, "name": root}),
        capture_output=True, text=True, check=True, cwd=JS,
    ).stdout
    types = re.sub(rf"export interface {root} {{[^}}]*}}\n", "", types)
    # json-schema-to-typescript's note on each definition, and the blank line before it
    types = re.sub(r"( \* ?\n)? \* This interface was referenced by .*\n \* via the .*\n", "",
                   types)
    types = re.sub(r"/\*\*\n \*/\n", "", types)  # a comment left empty
    lines = [HEADER, types.strip(), ""]
    for name, value in constants.items():
        doc = docs_of_constant(name)
        if "\n" in doc:
            lines += ["/**", *(f" * {line}" for line in doc.splitlines()), " */"]
        elif doc:
            lines.append(f"/** {doc} */")
        if isinstance(value, (list, tuple)):
            lines.append(f"export const {name} = {json.dumps(list(value))} as const;")
        else:
            lines.append(f"export const {name} = {json.dumps(value)};")
    text = "\n".join(lines) + "\n"
    formatted = subprocess.run(
        [str(JS / "node_modules" / ".bin" / "biome"), "format",
         f"--stdin-file-path={OUT.relative_to(JS)}"],
        input=text, capture_output=True, text=True, check=True, cwd=JS,
    ).stdout
    return formatted


def docs_of_constant(name: str) -> str:
    for module in MODULES:
        docs, _, _ = comments(importlib.import_module(module))
        if name in docs:
            return rst(docs[name])
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 (showing the difference) if the file is stale")
    args = parser.parse_args(argv)
    text = typescript()
    current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
    if args.check:
        if current != text:
            diff = difflib.unified_diff(current.splitlines(keepends=True),
                                        text.splitlines(keepends=True),
                                        str(OUT.relative_to(REPO)), "generated now")
            sys.stdout.writelines(diff)
            print(f"\n{OUT.relative_to(REPO)} is stale: run `{COMMAND}`", file=sys.stderr)
            return 1
        return 0
    if current != text:
        OUT.write_text(text, encoding="utf-8")
        print(f"wrote {OUT.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
