"""CONTRIBUTING.md's layout names every module of the package, and nothing that is not there.

The layout is the map an engineer picking the project up reads first; it drifted before (a module
named that did not exist, a dozen that did left out). Each room's entry is a comma-separated list
``module (what it is), module, …``; commas inside the parentheses are descriptions.
"""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "headtrace"


def layout_rooms() -> dict[str, str]:
    """Room (``core/``, ``api.py``) -> its text in the layout block of CONTRIBUTING.md."""
    block = (ROOT / "CONTRIBUTING.md").read_text().split("## Layout", 1)[1].split("```")[1]
    rooms, room = {}, None
    for line in block.split("src/headtrace/", 1)[1].splitlines():
        head = re.match(r"^  (\w+(?:/|\.py))\s+(.*)$", line)
        if head:
            room = head.group(1)
            rooms[room] = head.group(2)
        elif room and line.startswith("      "):
            rooms[room] += " " + line.strip()
    return rooms


def named_modules(text: str) -> set[str]:
    """The first word of each top-level comma-separated item (a trailing 'and' dropped)."""
    items, depth, item = [], 0, ""
    for ch in text:
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            items.append(item)
            item = ""
        else:
            item += ch
    items.append(item)
    return {re.match(r"\s*(?:and\s+)?([\w/]+)", i).group(1) for i in items if i.strip()}


def test_the_parser_reads_items_not_descriptions():
    assert named_modules("a (x, y), b, c (z (w), v), and d") == {"a", "b", "c", "d"}


def test_every_room_and_module_is_named_and_every_name_exists():
    rooms = layout_rooms()
    packages = {p.name + "/" for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    files = {p.name for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert set(rooms) == packages | files
    for room, text in rooms.items():
        if room.endswith(".py"):
            continue
        folder = PACKAGE / room
        modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
        modules |= {p.name + "/" for p in folder.iterdir() if (p / "__init__.py").is_file()}
        named = named_modules(text)
        assert not modules - named, f"{room}: not in CONTRIBUTING.md's layout: {sorted(modules - named)}"
        assert not named - modules, f"{room}: named in CONTRIBUTING.md's layout but not there: {sorted(named - modules)}"
