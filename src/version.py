"""The package version, in a module of its own so any layer can read it without importing the
public API (`artifactflow.__version__` re-exports it)."""

__version__ = "0.1.0"
