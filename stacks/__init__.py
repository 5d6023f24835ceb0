"""What to test: stack files, their typed schema, and pre-flight checks."""
