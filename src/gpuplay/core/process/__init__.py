"""Process plumbing: child lifelines, interrupting Python code, lazy imports, the command check."""
