"""The `hlo-opt` command line: a thin click group over the library.

``hlo-opt INPUT [options]`` (no sub-command) behaves like XLA's ``hlo-opt``; sub-commands
(`run`, `diff`, `dumps`, `pipelines`, ...) live one per module in ``hlo_opt/commands/`` and
are discovered here, so adding one never edits this file.
"""
from __future__ import annotations

import importlib
import pkgutil
import sys

import click

from . import commands
from .errors import HloError

DEFAULT_COMMAND = "opt"


class _DefaultGroup(click.Group):
    """A group whose first argument, when not a sub-command, goes to ``opt``."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h",
                                                                          "--version")):
            args = [DEFAULT_COMMAND] + list(args)
        return super().parse_args(ctx, args)

    def list_commands(self, ctx):
        return sorted(n for n in self.commands if n != DEFAULT_COMMAND)


@click.group(cls=_DefaultGroup, context_settings={"help_option_names": ["-h", "--help"]},
             invoke_without_command=False)
@click.version_option(package_name="hlo-opt", prog_name="hlo-opt")
def main():
    """hlo-opt: optimize, inspect and run XLA HLO modules.

    \b
    hlo-opt INPUT [--passes a,b | --pipeline NAME] [--xla_* flags]   optimize and print
    hlo-opt COMMAND ...                                             see the commands below
    """


def _register_commands() -> None:
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        cmd = getattr(module, "command", None)
        if isinstance(cmd, click.Command):
            main.add_command(cmd)


_register_commands()


def run() -> None:
    """Console-script entry: user errors become one red line and exit code 1."""
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
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        sys.exit(1)
    except BrokenPipeError:
        sys.exit(0)
