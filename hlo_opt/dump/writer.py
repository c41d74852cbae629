"""Writing dumps the way ``xla/service/dump.cc`` does.

:class:`DumpConfig` is XLA's ``CanonicalDebugOptions`` (which modules, passes and
pipelines to dump, where, in which formats).  :class:`DumpDirectory` owns one
``--xla_dump_to`` target (a directory, or ``-`` for stdout with ``*** Begin/End ***``
framing) and the module limit.  :class:`ModuleDumper` dumps one module: whole-module
dumps, the per-pass ``%04d.<pipeline>.after_<pass>.before_<next>`` dumps with a step counter
per module, the ``.debug_options`` file and the ``pass_stats.json``.

Every file is written atomically (temp file + rename).
"""
from __future__ import annotations

import logging
import os
import re
import sys
import time
from dataclasses import dataclass

from ..fileutil import write_atomic
from ..flags import DebugOptions
from .naming import (AFTER_OPTIMIZATIONS, DEBUG_OPTIONS_SUFFIX, PASS_STATS_SUFFIX,
                     between_passes_suffix, filename_for, sanitize_file_name)

__all__ = ["DumpConfig", "DumpDirectory", "ModuleDumper"]

log = logging.getLogger("hlo_opt.dump")

PIPELINE_START = "pipeline-start"


@dataclass
class DumpConfig:
    """XLA's CanonicalDebugOptions: the effective dump settings derived from the flags."""

    dump_to: str
    as_text: bool
    as_html: bool
    as_dot: bool
    long_text: bool
    include_timestamp: bool
    max_modules: int
    print_metadata: bool
    large_constants: bool
    module_re: "re.Pattern | None"
    pass_re_text: str
    pass_re: "re.Pattern | None"
    pipeline_re: "re.Pattern | None"
    dump_all_modules: bool
    unsupported: tuple = ()
    syntax_sugar_async_ops: bool = False  # XLA's flag: async ops sugared in text dumps too

    @classmethod
    def from_options(cls, o: DebugOptions) -> "DumpConfig":
        other_than_url = (o.xla_dump_hlo_as_text or o.xla_dump_hlo_as_proto
                          or o.xla_dump_hlo_as_dot or o.xla_dump_hlo_as_html
                          or o.xla_dump_hlo_snapshots)
        specified = other_than_url or o.xla_dump_hlo_as_url
        dump_to = o.xla_dump_to
        if "\0" in dump_to:
            from ..errors import FlagError
            raise FlagError("Invalid value for --xla_dump_to: a path cannot hold a NUL byte")
        if not (o.xla_enable_dumping and o.xla_detailed_logging):
            dump_to = ""
        if not o.xla_dump_to and other_than_url:
            dump_to = "-"
        return cls(
            dump_to=dump_to,
            as_text=o.xla_dump_hlo_as_text or not specified,
            as_html=o.xla_dump_hlo_as_html, as_dot=o.xla_dump_hlo_as_dot,
            long_text=o.xla_dump_hlo_as_long_text,
            include_timestamp=o.xla_dump_include_timestamp,
            max_modules=o.xla_dump_max_hlo_modules,
            print_metadata=not o.xla_dump_disable_metadata,
            large_constants=o.xla_dump_large_constants,
            module_re=_compile(o.xla_dump_hlo_module_re, "xla_dump_hlo_module_re"),
            pass_re_text=o.xla_dump_hlo_pass_re,
            pass_re=_compile(o.xla_dump_hlo_pass_re, "xla_dump_hlo_pass_re"),
            pipeline_re=_compile(o.xla_dump_hlo_pipeline_re, "xla_dump_hlo_pipeline_re"),
            dump_all_modules=bool(o.xla_dump_hlo_pass_re or o.xla_dump_to or specified),
            unsupported=tuple(f"--{name}" for name in _UNSUPPORTED_FORMATS
                              if getattr(o, name)),
            syntax_sugar_async_ops=o.xla_syntax_sugar_async_ops)

    @property
    def to_stdout(self) -> bool:
        return self.dump_to == "-"

    @property
    def active(self) -> bool:
        """Whether anything can be written at all."""
        return bool(self.dump_to)

    def should_dump_module(self, name: str) -> bool:
        if self.module_re is not None:
            return self.module_re.search(name) is not None
        return self.dump_all_modules

    def should_dump_pass(self, name: str) -> bool:
        return self.pass_re is not None and self.pass_re.search(name) is not None

    def should_dump_pipeline(self, name: str) -> bool:
        return self.pipeline_re is None or self.pipeline_re.search(name) is not None


# Format flags XLA has that hlo-opt accepts but does not write (no protobuf / URL plugin).
_UNSUPPORTED_FORMATS = ("xla_dump_hlo_as_proto", "xla_dump_hlo_as_url",
                        "xla_dump_hlo_snapshots", "xla_dump_fusion_visualization")


def _compile(pattern: str, flag: str):
    if not pattern:
        return None
    try:
        return re.compile(pattern)
    except re.error as e:
        from ..errors import FlagError
        raise FlagError(f"Invalid regular expression for --{flag}: {pattern!r} ({e})") from None


class DumpDirectory:
    """One ``--xla_dump_to`` target, shared by every module dumped in this process."""

    def __init__(self, config: DumpConfig, stdout=None):
        self.config = config
        self.stdout = stdout
        self.dumped_module_ids: set[int] = set()
        self._assets_href: str | None = None
        self._refused_stdout_formats: set[str] = set()
        if config.unsupported and config.active:
            log.warning("hlo-opt does not write these dump formats: %s (text, HTML and DOT "
                        "are supported)", ", ".join(config.unsupported))

    @property
    def path(self) -> str:
        return self.config.dump_to

    def _out(self):
        return self.stdout if self.stdout is not None else sys.stdout

    def may_dump(self, module_id: int) -> bool:
        """XLA's --xla_dump_max_hlo_modules: at most N distinct modules per process."""
        limit = self.config.max_modules
        if limit > 0 and module_id not in self.dumped_module_ids \
                and len(self.dumped_module_ids) >= limit:
            log.error("Have already dumped %d modules, more than the limit of %d",
                      len(self.dumped_module_ids), limit)
            return False
        self.dumped_module_ids.add(module_id)
        return True

    def write_text(self, filename: str, contents: str, stdout_ok: bool = True) -> str | None:
        """Write one file (or frame it on stdout); returns the path written, if any."""
        if self.config.to_stdout:
            if not stdout_ok:
                ext = filename.rsplit(".", 1)[-1]
                if ext not in self._refused_stdout_formats:
                    self._refused_stdout_formats.add(ext)
                    log.error("Refusing to write %s to stdout.  Pass --xla_dump_to=<path> to "
                              "write to a file.", filename)
                return None
            out = self._out()
            out.write(f"*** Begin {filename} ***\n{contents}\n*** End {filename} ***\n")
            out.flush()
            return None
        if not self.config.dump_to:
            return None
        path = os.path.join(self.config.dump_to, sanitize_file_name(filename))
        try:
            write_atomic(path, contents)
        except OSError as e:
            log.error("Could not write XLA debug data to %s: %s", path, e)
            return None
        return path

    def assets_href(self) -> str:
        """Write the HTML renderer's shared assets once; return their href for pages."""
        if self._assets_href is None:
            from . import html
            try:
                href = html.write_shared_assets(self.config.dump_to)
            except OSError as e:
                log.error("Could not write the HTML assets to %s: %s; pages carry their "
                          "own scripts", self.config.dump_to, e)
                href = ""
            self._assets_href = href if isinstance(href, str) else "."
        return self._assets_href or None


class ModuleDumper:
    """Dumps one module (id ``module_id``) into a :class:`DumpDirectory`."""

    def __init__(self, directory: DumpDirectory, module_id: int = 0,
                 options: DebugOptions | None = None):
        self.directory = directory
        self.config = directory.config
        self.module_id = module_id
        self.options = options
        self.step = 0
        self._timestamp: str | None = None

    # -- names --
    def timestamp(self) -> str:
        if not self.config.include_timestamp:
            return ""
        if self._timestamp is None:
            self._timestamp = str(time.time_ns() // 1000)
        return self._timestamp

    def filename(self, module, suffix: str, timestamp: bool = True) -> str:
        return filename_for(self.module_id, module.name, self.timestamp() if timestamp else "",
                            suffix)

    # -- dumping --
    def enabled(self, module) -> bool:
        return self.config.active and self.config.should_dump_module(module.name)

    def dump_module(self, module, suffix: str) -> list[str]:
        """XLA's DumpHloModuleIfEnabled: ``<file>.txt`` (+ .html/.dot) and .debug_options."""
        if not self.enabled(module):
            return []
        files = self._dump(module, self.filename(module, suffix))
        if self.options is not None and not self.config.to_stdout \
                and self.directory.may_dump(self.module_id):
            path = self.directory.write_text(
                self.filename(module, DEBUG_OPTIONS_SUFFIX, timestamp=False),
                self.options.to_debug_options_text())
            if path:
                files.append(path)
        return files

    def between_passes(self, module, pipeline: str, after: str, before: str,
                       changed: bool | None) -> tuple[int, list[str]] | None:
        """XLA's pipeline hook: with ``--xla_dump_hlo_pass_re=.*`` passes that changed
        nothing are not dumped; any other regex dumps every matching pass."""
        cfg = self.config
        if cfg.pass_re is None:
            return None
        if after != PIPELINE_START and not changed and cfg.pass_re_text == ".*":
            return None
        if not self.enabled(module):
            return None
        if not (cfg.should_dump_pass(before) or cfg.should_dump_pass(after)):
            return None
        if not cfg.should_dump_pipeline(pipeline):
            return None
        step = self.step
        self.step += 1
        suffix = between_passes_suffix(step, pipeline, after, before)
        return step, self._dump(module, self.filename(module, suffix))

    def write_stats(self, module, stats_json: str) -> str | None:
        if not self.enabled(module) or self.config.to_stdout:
            return None
        if not self.directory.may_dump(self.module_id):
            return None
        return self.directory.write_text(
            self.filename(module, PASS_STATS_SUFFIX, timestamp=False), stats_json)

    def _dump(self, module, filename: str) -> list[str]:
        cfg = self.config
        if not self.directory.may_dump(self.module_id):
            return []
        files: list[str] = []
        if cfg.as_text:
            text = module.to_text(operand_shapes=cfg.long_text,
                                  print_metadata=cfg.print_metadata,
                                  large_constants=cfg.large_constants,
                                  syntax_sugar_async_ops=cfg.syntax_sugar_async_ops)
            path = self.directory.write_text(filename + ".txt", text)
            if path:
                files.append(path)
        if cfg.as_dot:
            from . import dot
            path = self.directory.write_text(filename + ".dot", dot.module_to_dot(module),
                                             stdout_ok=False)
            if path:
                files.append(path)
        if cfg.as_html:
            files += self._dump_html(module, filename)
        return files

    def _dump_html(self, module, filename: str) -> list[str]:
        if self.config.to_stdout:
            self.directory.write_text(filename + ".html", "", stdout_ok=False)
            return []
        from . import html
        href = self.directory.assets_href()
        files = []
        prepared = html.module_body(module)  # the module's text: one print for both pages
        path = self.directory.write_text(
            filename + ".html", html.module_to_html(module, title=filename,
                                                    asset_dir_href=href, prepared=prepared))
        if path:
            files.append(path)
        if AFTER_OPTIMIZATIONS in filename:  # XLA: fusion bodies hidden, big modules stay usable
            path = self.directory.write_text(
                filename + ".top_level.html",
                html.module_to_html(module, title=filename, asset_dir_href=href,
                                    top_level=True, prepared=prepared))
            if path:
                files.append(path)
        return files

