"""The library's version, in a module of its own so that any layer can name it without
importing the package's face (``scoreband/__init__.py`` sits above the layers it exports)."""

__version__ = "0.1.0"
