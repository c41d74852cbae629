# lit configuration for hlo-opt's FileCheck tests (run: lit -v tests/lit).
#
# Like XLA's xla/lit.cfg.py, but lit 23 rejects ShTest(execute_external=True), so the
# internal shell is used (it handles |, &&, 2>&1, not, %s and %t).  FileCheck is the
# PyPI `filecheck`; the venv's bin directory (hlo-opt, filecheck) goes first on PATH, and
# XLA_FLAGS is passed through as XLA's config does.
import os
import shutil
import sys

import lit.formats

config.name = "hlo-opt"
config.test_format = lit.formats.ShTest()
config.suffixes = [".hlo"]
config.excludes = ["inputs"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))
config.test_exec_root = os.path.join(config.test_source_root, ".lit_out")

_repo = os.path.dirname(os.path.dirname(config.test_source_root))
_bins = [os.path.join(_repo, ".venv", "bin"), os.path.dirname(sys.executable)]
_path = os.pathsep.join(_bins + [os.environ.get("PATH", "")])
config.environment["PATH"] = _path

_filecheck = shutil.which("FileCheck", path=_path) or shutil.which("filecheck", path=_path)
if _filecheck is None:
    lit_config.fatal("FileCheck not found: pip install filecheck (the test extra)")
if shutil.which("hlo-opt", path=_path) is None:
    lit_config.fatal("hlo-opt not found on PATH: pip install -e . (make install)")
config.substitutions.append(("FileCheck", _filecheck))
config.substitutions.append(("%PYTHON", sys.executable))
config.substitutions.append(("%samples", os.path.join(_repo, "sample_modules")))

for _var in ("XLA_FLAGS", "HOME", "TMPDIR"):
    if _var in os.environ:
        config.environment[_var] = os.environ[_var]
