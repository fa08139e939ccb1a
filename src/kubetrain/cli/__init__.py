"""The ``kubetrain`` command line."""
