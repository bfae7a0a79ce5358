"""Data shipped with edgeplan: measurements made on the reference machine, with provenance."""
