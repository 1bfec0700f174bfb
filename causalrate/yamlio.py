"""Reading a user's YAML (a study, a model, a perturbation suite) with limits: a size, what its aliases may
expand to, no key given twice; a YAML error is a UserError naming the file, line and column (exit code 2)."""

from __future__ import annotations

from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from causalrate.errors import UserError

MAX_YAML_BYTES = 1_000_000  # a study or model YAML is a page or two; beyond this it is not one
MAX_YAML_EXPANDED = 100_000  # values the aliases (*name) of one file expand to: ample for a config, not a bomb
MAX_YAML_DEPTH = 50  # nested collections: a config needs a handful; thousands overflowed Python's stack


class Loader(yaml.SafeLoader):
    """yaml's safe loader, but an impossible date (2021-13-01) is a YAML error at its line, not a ValueError;
    a key given twice in one mapping is an error (not the last one silently kept); aliases may expand to at
    most MAX_YAML_EXPANDED values (a few hundred bytes of nested aliases would otherwise be gigabytes); nesting
    is at most MAX_YAML_DEPTH deep (5,000 brackets were a RecursionError traceback)."""

    def compose_node(self, parent, index):
        self.depth = getattr(self, "depth", 0) + 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"nested more than {MAX_YAML_DEPTH} levels deep; a config is not",
                    self.peek_event().start_mark,
                )
            return self._compose_counted(parent, index)
        finally:
            self.depth -= 1

    def _compose_counted(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            anchored = self.anchors.get(event.anchor)
            if anchored is not None:
                self.expanded = getattr(self, "expanded", 0) + _values(anchored, self.__dict__.setdefault("sizes", {}))
                if self.expanded > MAX_YAML_EXPANDED:
                    raise yaml.composer.ComposerError(
                        None,
                        None,
                        f"its aliases (*name) expand to more than {MAX_YAML_EXPANDED} values; write the values out",
                        event.start_mark,
                    )
        return super().compose_node(parent, index)

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        raise yaml.constructor.ConstructorError(
                            None, None, f"key {key.value!r} is given twice in one mapping; keep one", key.start_mark
                        )
                    seen.add(key.value)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_timestamp(self, node):
        try:
            return super().construct_yaml_timestamp(node)
        except ValueError as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"{node.value!r} is not a date ({exc}); expected YYYY-MM-DD", node.start_mark
            ) from None


def _values(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values a YAML node stands for, its aliased parts expanded (memoised per node in `sizes`)."""
    if id(node) not in sizes:
        if isinstance(node, yaml.SequenceNode):
            sizes[id(node)] = 1 + sum(_values(child, sizes) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            sizes[id(node)] = 1 + sum(_values(k, sizes) + _values(v, sizes) for k, v in node.value)
        else:
            sizes[id(node)] = 1
    return sizes[id(node)]


Loader.add_constructor("tag:yaml.org,2002:timestamp", Loader.construct_yaml_timestamp)


def read_yaml(path: Path | Traversable) -> object:
    """The plain data of a YAML file, read with Loader's limits; a file too large or not valid YAML is a
    UserError naming the file (and the line). OSErrors (no such file, a folder) are the caller's to word."""
    if isinstance(path, Path) and path.is_file() and path.stat().st_size > MAX_YAML_BYTES:
        raise UserError(f"{path}: {path.stat().st_size} bytes; a config is at most {MAX_YAML_BYTES} bytes")
    content = path.read_bytes()
    try:  # YAML is UTF-8, or UTF-16 with its byte-order mark (Windows' Notepad "Unicode")
        text = content.decode("utf-16" if content.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8")
    except UnicodeDecodeError as exc:
        line = content[: exc.start].count(b"\n") + 1
        raise UserError(
            f"{path}: not UTF-8 text: byte {content[exc.start]:#04x} on line {line} (another encoding, or not a "
            "text file); save it as UTF-8"
        ) from None
    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader: plain data only
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise UserError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
