"""(family module; ops are added here)."""
