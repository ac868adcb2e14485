"""Code generation: loop IR -> C text (c.py), and the bundle files from templates (bundle.py)."""
