"""The offline demo: see README.md beside this file."""
