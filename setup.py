from setuptools import setup

setup(cffi_modules=["xg2_plugin/_build.py:ffibuilder"])
