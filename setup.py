"""What pyproject.toml cannot say: every wheel is built from a clean ``build/lib``.

setuptools copies the package into ``build/lib`` and then packs *everything*
found there, so a file left in it by an older build or by hand would ship in
the wheel. Emptying it before ``build_py`` copies makes the wheel hold exactly
the package and its data. All metadata is in pyproject.toml.
"""

from __future__ import annotations

import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class CleanBuildPy(build_py):
    """``build_py`` that first removes what an earlier build left in ``build_lib``."""

    def run(self) -> None:
        # Editable installs build into a fresh temporary directory: nothing to clean.
        if not self.editable_mode:
            shutil.rmtree(self.build_lib, ignore_errors=True)
        super().run()


setup(cmdclass={"build_py": CleanBuildPy})
