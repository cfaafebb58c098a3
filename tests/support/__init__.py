"""Plain helpers shared by several test modules: constants, functions and fake classes, one theme a
module. Fixtures and hooks live in the conftest.py files, never here; a test module may import from
here, never from another test module or a conftest.py (tests/README.md)."""
