"""Dumps as XLA writes them: file naming, text/HTML/DOT files, per-pass statistics.

- :mod:`.naming`: ``FilenameFor`` / ``SanitizeFileName`` and parsing names back.
- :mod:`.writer`: :class:`DumpConfig`, :class:`DumpDirectory`, :class:`ModuleDumper`.
- :mod:`.stats`: :class:`PassStats` (``pass_stats.json``).
- :mod:`.inspect`: reading a dump directory back (``hlo-opt dumps``).
- ``html`` / ``dot``: the graph renderers (imported lazily, only when asked for).
"""
from .naming import filename_for, parse_dump_name, sanitize_file_name
from .stats import PassRecord, PassStats
from .writer import DumpConfig, DumpDirectory, ModuleDumper

__all__ = ["DumpConfig", "DumpDirectory", "ModuleDumper", "PassRecord", "PassStats",
           "filename_for", "parse_dump_name", "sanitize_file_name"]
