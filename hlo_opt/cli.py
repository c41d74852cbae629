"""The `hlo-opt` command line: a thin click group over the library.

``hlo-opt INPUT [options]`` (no sub-command) behaves like XLA's ``hlo-opt``; sub-commands
(`run`, `diff`, `dumps`, `pipelines`, ...) live one per module in ``hlo_opt/commands/`` and
are found here by module name, so adding one never edits this file.  A command module is
imported only when it runs (or when the help lists it), and command modules import the
library inside their functions: ``hlo-opt --help`` starts in about the time of
``import click``.
"""
from __future__ import annotations

import os
import pkgutil
import sys

import click

from . import commands
from .errors import HloError, quote

DEFAULT_COMMAND = "opt"
_TOP_LEVEL_FLAGS = ("--help", "-h", "--version", "-V")


def _command_names() -> list[str]:
    return sorted(i.name.replace("_", "-") for i in pkgutil.iter_modules(commands.__path__)
                  if not i.name.startswith("_"))


class _DefaultGroup(click.Group):
    """A group whose first argument, when not a sub-command, goes to ``opt``; commands
    load on first use."""

    def list_commands(self, ctx):
        return [n for n in _command_names() if n != DEFAULT_COMMAND]

    def get_command(self, ctx, name):
        if name not in _command_names():
            return None
        import importlib
        module = importlib.import_module(f"{commands.__name__}.{name.replace('-', '_')}")
        cmd = getattr(module, "command", None)
        return cmd if isinstance(cmd, click.Command) else None

    def parse_args(self, ctx, args):
        if args and args[0] not in _TOP_LEVEL_FLAGS and args[0] not in _command_names():
            _check_not_a_misspelt_command(args[0])
        if not args or (args[0] not in _command_names() and args[0] not in _TOP_LEVEL_FLAGS):
            args = [DEFAULT_COMMAND] + list(args)
        return super().parse_args(ctx, args)

    def format_options(self, ctx, formatter):
        """The optimize options first (they are what ``hlo-opt INPUT`` takes), then the
        group's own and the commands."""
        opt = self.get_command(ctx, DEFAULT_COMMAND)
        if opt is not None:
            with click.Context(opt, info_name="hlo-opt", parent=None) as sub:
                rows = [r for p in opt.get_params(sub)
                        if isinstance(p, click.Option) and "--help" not in p.opts
                        and (r := p.get_help_record(sub))]
            with formatter.section("Options (hlo-opt INPUT ...)"):
                formatter.write_dl(rows)
        super().format_options(ctx, formatter)


def _check_not_a_misspelt_command(word: str) -> None:
    """``hlo-opt ablate`` where no such file exists: say it is no command either."""
    if word.startswith("-") or os.path.exists(word) or not word.replace("-", "").isalnum():
        return
    if "." in word or "/" in word:
        return
    raise HloError(f"hlo-opt: error: '{quote(word, 60)}' is neither a command nor a file "
                   f"(commands: {', '.join(n for n in _command_names() if n != 'opt')}; "
                   "or give a path to an HLO file)")


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=False)
@click.version_option(None, "-V", "--version", package_name="hlo-opt", prog_name="hlo-opt")
def main():
    """hlo-opt: optimize, inspect and run XLA HLO modules.

    \b
    hlo-opt INPUT [--passes a,b | --pipeline NAME] [--xla_* flags]   optimize and print
    hlo-opt COMMAND ...                                             see the commands below
    """


def run() -> None:
    """Console-script entry: user errors become one red line and a non-zero exit code."""
    try:
        rc = main.main(standalone_mode=False)
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except HloError as e:
        click.secho(str(e), fg="red", err=True)
        sys.exit(getattr(e, "exit_code", 1))
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code if e.exit_code != 2 else 1)
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.secho("hlo-opt: interrupted", fg="red", err=True)
        sys.exit(130)
    except MemoryError:
        click.secho("hlo-opt: error: out of memory (the module or its inputs are too large "
                    "for this machine)", fg="red", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
