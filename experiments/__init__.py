"""One module per paper result that edgeplan reproduces, printing paper vs edgeplan side by side."""
