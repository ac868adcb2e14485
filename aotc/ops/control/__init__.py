"""Control flow with subgraphs: If, Loop, Scan and their closed bodies."""
