"""Maps the top-level folders onto one import package (see the comment in pyproject.toml)."""
from setuptools import find_packages, setup

ROOTS = {"pategail": "pategail", "pategail.sdk": "sdk/pategail/sdk"}   # pategail.server, .export: under pategail/
packages = []
for name, folder in ROOTS.items():
    packages += [name] + [f"{name}.{sub}" for sub in find_packages(folder)]
setup(packages=packages, package_dir=ROOTS)
